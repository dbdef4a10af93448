"""The learner: Celery tasks that turn feedback into gated LoRA updates and deploy them."""
