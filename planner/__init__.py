"""planner: capacity planning for LLM inference fleets.

The slow loop forecasts demand and places GPU replicas at least cost; the fast loop
simulates the provisioned capacity under the fleet's scheduling policy and checks
each traffic class's latency SLO.
"""

__version__ = "0.1.0"
