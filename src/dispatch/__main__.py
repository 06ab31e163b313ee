from dispatch.cli.main import main

main()
