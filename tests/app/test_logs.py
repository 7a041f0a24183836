"""The studio's log (spirula/app/logs.py): tracebacks to the log file, one line to the terminal, the
last traceback for the error dialog's details."""

import logging


def test_tracebacks_go_to_the_file_and_the_terminal_gets_one_line(tmp_path, monkeypatch, capsys):
    from spirula.app import logs

    monkeypatch.setenv("SPIRULA_LOG_FILE", str(tmp_path / "studio.log"))
    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    try:
        assert logs.setup("WARNING") == tmp_path / "studio.log"
        try:
            {}["missing"]
        except KeyError:
            logging.getLogger("spirula.app").exception("handling a drop failed")
        for h in root.handlers:
            h.flush()
    finally:
        _restore_root(root, before, level)
    text = (tmp_path / "studio.log").read_text()
    assert "handling a drop failed" in text and "Traceback" in text and "KeyError" in text
    err = capsys.readouterr().err
    assert "error: handling a drop failed" in err and "Traceback" not in err
    d = logs.details()
    assert d.startswith(f"Log file: {tmp_path / 'studio.log'}") and "KeyError" in d


def test_the_terminal_gets_each_warning_once_after_the_clis_basic_config(tmp_path, monkeypatch, capsys):
    """`spirula` (spirula/engine/cli/main.py) calls logging.basicConfig before the studio sets up its log."""
    from spirula.app import logs

    monkeypatch.setenv("SPIRULA_LOG_FILE", str(tmp_path / "studio.log"))
    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    cli = logging.StreamHandler()                        # what basicConfig adds
    cli.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    root.addHandler(cli)
    try:
        logs.setup("WARNING")
        logging.getLogger("spirula.engine.ingest").warning("17 of 67 frames have no image file")
        logging.getLogger("spirula.session").info("viewport: presenting")
    finally:
        _restore_root(root, before, level)
    err = capsys.readouterr().err
    assert err.count("17 of 67 frames") == 1 and "warning: 17 of 67 frames" in err
    assert "presenting" not in err                       # info goes to the file only
    assert "presenting" in (tmp_path / "studio.log").read_text()


def _restore_root(root, before, level) -> None:
    """Take off (and close) the handlers a test added to the root logger; restore its level."""
    for h in root.handlers[:]:
        if h not in before:
            root.removeHandler(h)
            h.close()
    root.setLevel(level)
