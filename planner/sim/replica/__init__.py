"""The LLM replica model: continuous batching with chunked prefill, a KV-cache budget,
admission control, the registry's scheduling policies, a prefix cache per replica, and
routing across replicas.

Modules: ``pool`` (a pool as Python values, μ_k for c-mu, one replication), ``state``
(array layout of the compiled engine), ``engine`` (event loop, expiry, routing calls),
``batching`` (one replica's step), ``prefix`` (the prefix cache), ``requests`` (queue/batch moves, keys, preemption),
``trail`` (Trail-limited SRPT preemption), ``heap`` (waiting queues), ``routing``,
``borrow`` (reference-count-free array views), ``inline`` (how the per-event helpers are
inlined), ``metrics`` and ``run`` (per-class metrics with confidence intervals over
replications), ``static_batch`` (check against measured end-to-end times).
"""
