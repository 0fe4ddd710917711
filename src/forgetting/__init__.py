"""forgetting: trajectory deletion in software-engineering LLM agents, as a reproducible pipeline."""

__version__ = "0.1.0"
