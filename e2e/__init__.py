"""End-to-end runs of the real Claude Code CLI through a real `claudex serve` (`make e2e`)."""
