"""The chaos soak's tasks and side table (``python bench/soak.py``): never the product's app."""
