"""The work of one training step under a parallel layout: FLOPs, bytes, shapes, memory; no seconds."""
