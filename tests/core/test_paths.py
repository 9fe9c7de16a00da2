"""The cache root (`wmrl.paths`): one resolution, read by every part that keeps files in the cache."""

from __future__ import annotations

from pathlib import Path

from wmrl.paths import cache_dir, default_cache_dir


def test_the_cache_root_is_wmrl_cache_else_xdg_else_home(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("WMRL_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "wmrl"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "wmrl"
    monkeypatch.setenv("WMRL_CACHE", "~/mine")
    assert default_cache_dir() == tmp_path / "home" / "mine"
    assert cache_dir("~/given") == tmp_path / "home" / "given" and cache_dir() == default_cache_dir()


def test_the_task_suite_and_the_runtime_views_live_under_it(monkeypatch, tmp_path):
    from wmrl.autoresearch.environments.sandbox.runtime_view import default_views_dir
    from wmrl.autoresearch.tasks.suite import TaskSuite

    monkeypatch.setenv("WMRL_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("WMRL_RUNTIME_VIEWS", raising=False)
    assert TaskSuite().cache_dir == tmp_path / "cache"
    assert default_views_dir() == Path(tmp_path / "cache" / "runtime-views")
