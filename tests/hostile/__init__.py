"""Hostile conditions: upstreams, callers, captures and output that try to break the proxy's
promises. Loopback only; every test is bounded in requests and time."""
