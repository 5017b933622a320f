"""transformers glue: the bundled model catalog, configs from anywhere, weightless models, and
the prefill/decode workflow (`profile_generation`)."""

from dispatchprof.errors import ModelSpecError
from dispatchprof.llm.catalog import load_config
from dispatchprof.llm.generation import profile_generation
from dispatchprof.llm.models import build_model

__all__ = ["ModelSpecError", "build_model", "load_config", "profile_generation"]
