"""docs/docker.md shows the example files of docs/examples/ as they are in the repository."""

from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize(
    ("name", "fence"),
    [("docker-compose.yml", "yaml"), ("mysite.env", "ini"), ("Dockerfile", "dockerfile")],
)
def test_the_page_shows_each_file_verbatim(name: str, fence: str) -> None:
    page = (DOCS / "docker.md").read_text()
    text = (DOCS / "examples" / name).read_text()
    assert f"```{fence}\n{text}```\n" in page


def test_the_compose_file_names_its_services_and_env_file() -> None:
    yaml = pytest.importorskip("yaml")  # mkdocs brings PyYAML; the test extra does not
    compose = yaml.safe_load((DOCS / "examples" / "docker-compose.yml").read_text())
    assert sorted(compose["services"]) == ["db", "migrate", "web", "worker"]
    worker = compose["services"]["worker"]
    assert worker["command"] == ["python", "manage.py", "runjobs"]
    assert worker["stop_signal"] == "SIGTERM"
    for service in ("migrate", "web", "worker"):
        env_file = compose["services"][service]["env_file"]
        assert (DOCS / "examples" / env_file).exists()
