"""What dispatch asks of Kubeflow, built as plain data: names, settings, the runtime rules, the
checks of a job, the TrainJob and the plan, and the JobSet Trainer makes of them. Pure."""
