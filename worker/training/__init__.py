"""How the shipped demo models were made: the corpus and the training script (`make train`).

Kept apart from `worker/engine/`, which only serves models; nothing here runs in a worker.
"""
