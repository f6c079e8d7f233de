"""One TracerProvider for the session (the API lets the global one be set only once), whose
in-memory exporter keeps spans only while a test asks for them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


class Switched(SimpleSpanProcessor):
    """Export only while ``on``: the rest of the suite, run after these tests in the same
    session, keeps no spans."""

    on = False

    def on_end(self, span: ReadableSpan) -> None:
        if self.on:
            super().on_end(span)


@pytest.fixture(scope="session")
def _tracing() -> tuple[Switched, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    processor = Switched(exporter)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    if trace.get_tracer_provider() is not provider:
        pytest.fail("another TracerProvider was set before this session's: spans would be lost")
    return processor, exporter


@pytest.fixture
def spans(_tracing: tuple[Switched, InMemorySpanExporter]) -> Iterator[InMemorySpanExporter]:
    """The finished spans of this test, in ``spans.get_finished_spans()``."""
    processor, exporter = _tracing
    exporter.clear()
    processor.on = True
    try:
        yield exporter
    finally:
        processor.on = False
        exporter.clear()
