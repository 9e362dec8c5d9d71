from pathlib import Path

import pytest

from app.config import ConfigError, load_settings, parse_target_flag, resolve_ui_base_url


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "phasewatch.yaml"
    p.write_text(text)
    return p


def test_defaults_need_no_file() -> None:
    s = load_settings()
    assert s.scrape.interval == 5.0
    assert s.slo.ttft_p99 == 2.0 and s.slo.itl_p99 == 0.1
    assert s.storage.retention_days == 7.0
    assert s.server.host == "127.0.0.1"


def test_yaml_file_sets_targets_and_slos(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        """
targets:
  - name: llama-a
    url: http://127.0.0.1:8000/metrics
    labels: {cluster: eu}
slo:
  ttft_p99: 1.5
  overrides:
    llama-a: {ttft_p99: 0.5, itl_p99: 0.05}
""",
    )
    s = load_settings(p)
    assert s.targets[0].labels == {"cluster": "eu"}
    assert s.slo.overrides["llama-a"].ttft_p99 == 0.5
    assert s.slo.ttft_p99 == 1.5


def test_environment_overrides_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = write(tmp_path, "scrape: {interval: 10}\n")
    monkeypatch.setenv("PHASEWATCH_SCRAPE__INTERVAL", "2.5")
    assert load_settings(p).scrape.interval == 2.5


def test_cli_overrides_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PHASEWATCH_SERVER__PORT", "9000")
    assert load_settings(None, {"server": {"port": 9100}}).server.port == 9100


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("scrape: {interval: -1}\n", "scrape.interval"),
        ("scrape: {intervall: 5}\n", "scrape.intervall"),
        ("targets: [{name: a, url: 'ftp://x'}]\n", "targets.0.url"),
        ("targets: [{name: a, url: 'http://x'}, {name: a, url: 'http://y'}]\n", "targets"),
        ("slo: {ttft_p99: fast}\n", "slo.ttft_p99"),
        (
            "targets: [{name: a, url: 'http://x', server: {gpu_memory_utilization: 1.5}}]\n",
            "targets.0.server.gpu_memory_utilization",
        ),
        (
            "targets: [{name: a, url: 'http://x', server: {max_num_seq: 8}}]\n",
            "targets.0.server.max_num_seq",
        ),
        (
            "targets: [{name: a, url: 'http://x', server: {max_num_seqs: 0}}]\n",
            "targets.0.server.max_num_seqs",
        ),
    ],
)
def test_bad_value_names_the_field(tmp_path: Path, text: str, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(write(tmp_path, text))
    assert f": {field}:" in str(err.value)
    assert "\n" not in str(err.value)


def test_unreadable_and_non_mapping_files_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(tmp_path / "absent.yaml")
    with pytest.raises(ConfigError, match="mapping"):
        load_settings(write(tmp_path, "- a\n- b\n"))
    with pytest.raises(ConfigError, match="YAML"):
        load_settings(write(tmp_path, "a: [\n"))


def test_target_flag_parses_and_rejects() -> None:
    assert parse_target_flag("a=http://h:1/metrics") == {"name": "a", "url": "http://h:1/metrics"}
    with pytest.raises(ConfigError):
        parse_target_flag("no-url")


def test_ui_base_url_is_where_the_service_listens_unless_set() -> None:
    # Unset: the listening address and port, so a link works with --port 18321.
    assert resolve_ui_base_url(None, "127.0.0.1", 18321, hostname="h") == (
        "http://127.0.0.1:18321/ui"
    )
    # On every interface: this machine's name, which its peers can open.
    for everywhere in ("0.0.0.0", "::"):
        url = resolve_ui_base_url(None, everywhere, 8321, hostname="gpu-box-7")
        assert url == "http://gpu-box-7:8321/ui"
    assert resolve_ui_base_url(None, "::1", 9000, hostname="h") == "http://[::1]:9000/ui"
    # Set: the external URL as given (a proxy in front), whatever the port.
    external = "https://phasewatch.example.com/ui/"
    assert resolve_ui_base_url(external, "0.0.0.0", 1, hostname="h") == external.rstrip("/")
    s = load_settings(None, {"server": {"host": "0.0.0.0", "port": 18321}})
    assert s.ui_base_url is None and s.ui_url("gpu-box-7") == "http://gpu-box-7:18321/ui"


def test_a_target_may_say_its_engine_settings(tmp_path: Path) -> None:
    text = (
        "targets:\n"
        "  - name: a\n"
        "    url: http://x:8000/metrics\n"
        "    server: {max_num_seqs: 128, gpu_memory_utilization: 0.85, device: H100-80GB}\n"
        "  - {name: b, url: 'http://y:8000/metrics'}\n"
    )
    a, b = load_settings(write(tmp_path, text)).targets
    assert a.server is not None and b.server is None
    assert (a.server.max_num_seqs, a.server.gpu_memory_utilization) == (128, 0.85)
    assert a.server.device == "H100-80GB" and a.server.max_model_len is None
