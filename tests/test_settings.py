"""Settings come from CHIPLORE_* variables; the password never shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from chiplore.core.settings import Settings


def test_environment_configures_every_field(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CHIPLORE_STORE", "neo4j")
    monkeypatch.setenv("CHIPLORE_NEO4J_URI", "bolt://db:7687")
    monkeypatch.setenv("CHIPLORE_NEO4J_PASSWORD", "s3cret-value")
    monkeypatch.setenv("CHIPLORE_NEO4J_DATABASE", "graphs")
    monkeypatch.setenv("CHIPLORE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("CHIPLORE_SEED", "42")
    settings = Settings()
    assert (settings.store, settings.neo4j_uri, settings.neo4j_database, settings.seed) == (
        "neo4j",
        "bolt://db:7687",
        "graphs",
        42,
    )
    assert settings.data_dir == tmp_path
    assert settings.neo4j_password.get_secret_value() == "s3cret-value"
    assert "s3cret-value" not in repr(settings) and "s3cret-value" not in str(settings.public_view())


def test_defaults_are_the_embedded_store_in_the_user_data_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CHIPLORE_STORE", "CHIPLORE_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    settings = Settings()
    assert settings.store == "embedded"
    assert "chiplore" in str(settings.data_dir)


def test_unknown_store_is_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHIPLORE_STORE", "sqlite")
    with pytest.raises(ValueError):
        Settings()


def test_neo4j_s_administration_database_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """A user's CHIPLORE_NEO4J_DATABASE=system met a raw Cypher error in every command."""
    monkeypatch.setenv("CHIPLORE_NEO4J_DATABASE", "System")
    with pytest.raises(ValueError, match="administration database holds no graph"):
        Settings()
