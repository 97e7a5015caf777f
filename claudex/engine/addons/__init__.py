"""Features on the request lifecycle, each an addon with hook methods the core calls."""
