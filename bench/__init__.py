"""`make bench`: measures what claudex costs on the forwarding path (see bench/run.py)."""
