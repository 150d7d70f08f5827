"""Building blocks that wrap the attention family for host frameworks."""
