"""The fast loop: a multiclass queue for theory checks and reference experiments, and an LLM
replica model for planning, sharing one registry of scheduling policies."""
