"""Training at scale: a counted training step split by data parallelism / ZeRO / FSDP, tensor,
pipeline and context parallelism, with recompute and FP8 linears (docs/training.md)."""

from dispatchprof.train.layout import TrainLayout
from dispatchprof.train.step import TrainingResult, profile_training

__all__ = ["TrainLayout", "TrainingResult", "profile_training"]
