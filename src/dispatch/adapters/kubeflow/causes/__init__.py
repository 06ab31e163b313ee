"""Why an attempt ended: one reader per evidence source turns objects into facts, and one pure
decision turns the facts into an outcome. No I/O, no clock."""
