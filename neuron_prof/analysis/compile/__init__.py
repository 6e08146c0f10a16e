"""Compiles: first-call compile stalls (`stalls`), the compile events and their signatures (`events`),
torch.compile graphs and recompiles (`graphs`), shape churn and its bucket plan (`churn`, `churn_source`,
`buckets`, `shapes`) and a compile cache lost between runs (`cache_lost`)."""
