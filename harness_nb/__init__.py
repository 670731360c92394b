"""harness_nb: an LLM agent harness that lives inside a Jupyter kernel."""

__version__ = "0.1.0"
