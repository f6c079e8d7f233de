from django.db import models


class Execution(models.Model):
    """One side effect of a handler, committed as it happens, so that tests count real runs."""

    label = models.CharField(max_length=100)
    job_id = models.BigIntegerField(null=True)
    attempt = models.IntegerField(null=True)
    pid = models.IntegerField()
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
