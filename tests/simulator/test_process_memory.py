"""The executor's process-memory settings: applied on glibc, and never over a switch the user set."""

from __future__ import annotations

import platform

import pytest

from chiplore.simulator.execute import process_memory

glibc = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")


@glibc
def test_freed_memory_is_kept_where_the_user_set_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in process_memory._GLIBC_SWITCHES:
        monkeypatch.delenv(name, raising=False)
    assert process_memory.keep_freed_memory()


@pytest.mark.parametrize("switch", process_memory._GLIBC_SWITCHES)
def test_a_malloc_setting_of_the_users_is_left_alone(monkeypatch: pytest.MonkeyPatch, switch: str) -> None:
    monkeypatch.setenv(switch, "1")
    assert not process_memory.keep_freed_memory()


def test_huge_pages_stay_on_where_the_user_asked_for_them(monkeypatch: pytest.MonkeyPatch) -> None:
    core = process_memory.numpy_multiarray()
    monkeypatch.setenv("NUMPY_MADVISE_HUGEPAGE", "1")
    before = core._set_madvise_hugepage(True)  # returns the previous setting
    try:
        process_memory.without_huge_pages()
        assert core._set_madvise_hugepage(True) is True  # untouched by the call
        monkeypatch.delenv("NUMPY_MADVISE_HUGEPAGE")
        process_memory.without_huge_pages()
        assert core._set_madvise_hugepage(before) is False
    finally:
        core._set_madvise_hugepage(before)
