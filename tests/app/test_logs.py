"""The studio's log (app/logs.py): tracebacks to the log file, one line to the terminal, the
last traceback for the error dialog's details."""

import logging


def test_tracebacks_go_to_the_file_and_the_terminal_gets_one_line(tmp_path, monkeypatch, capsys):
    from app import logs

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
        for h in root.handlers[:]:
            if h not in before:
                root.removeHandler(h)
                h.close()
        root.setLevel(level)
    text = (tmp_path / "studio.log").read_text()
    assert "handling a drop failed" in text and "Traceback" in text and "KeyError" in text
    err = capsys.readouterr().err
    assert "error: handling a drop failed" in err and "Traceback" not in err
    d = logs.details()
    assert d.startswith(f"Log file: {tmp_path / 'studio.log'}") and "KeyError" in d
