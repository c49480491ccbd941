"""kbase.cli.progress: what the CLI says while it embeds (the time left, from the measured rate;
watch's lines while idle)."""

from __future__ import annotations

from kbase.records import EmbedReport


def test_watch_says_every_chunk_is_embedded_once(capsys):
    from kbase.cli.progress import IdleEmbedLines

    lines = IdleEmbedLines(clock=lambda: 0.0)
    for _ in range(3):  # a change's own chunks: nothing was waiting, nothing to say
        lines(EmbedReport(embedded=2, remaining=0))
    assert capsys.readouterr().out == ""
    for left in (300, 236, 172, 108, 44, 0, 0, 0):  # a backlog, embedded step by step
        lines(EmbedReport(embedded=64, remaining=left))
    out = capsys.readouterr().out.splitlines()
    assert [line[9:] for line in out] == [
        "embedding while idle: 300 chunks still to embed",
        "embedding while idle: every chunk is embedded",
    ]


def _embedding_run(n=3000, window=256, batch=8, warmup=2.0, seed=7):
    """(time, done) after each batch of a run shaped like kbase's: windows of ``window`` chunks,
    each run shortest first, a batch costing its tokens; the first batch also loads the model."""
    import random

    rnd = random.Random(seed)
    lengths = [rnd.choice((20, 40, 60, 120, 200, 256, 256)) for _ in range(n)]
    t, done, out = 0.0, 0, [(0.0, 0)]
    for w in range(0, n, window):
        part = sorted(lengths[w : w + window])
        for b in range(0, len(part), batch):
            t += sum(part[b : b + batch]) * 0.0004 + (warmup if done == 0 else 0.0)
            done += len(part[b : b + batch])
            out.append((t, done))
    return out


def test_the_estimate_comes_from_the_measured_rate_and_stays_current(capsys):
    from kbase.cli.progress import EmbedEta

    run_ = _embedding_run()
    total, end = run_[-1][1], run_[-1][0]
    now = [0.0]
    eta = EmbedEta(lambda d, t: None, True, clock=lambda: now[0])
    for t, done in run_:
        now[0] = t
        eta(done, total)
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("embedding:")]
    assert len(lines) >= 3, lines  # told, then told again as it goes (no terminal: new lines)
    first_at = next(t for t, d in run_ if d >= 256 and t >= 5)
    told = _seconds(lines[0])
    assert abs(told - (end - first_at)) <= 0.25 * (end - first_at), (told, end - first_at)
    assert "of 3,000 chunks done" in lines[1]


def test_nothing_to_embed_is_not_announced(capsys):
    from kbase.cli.progress import EmbedEta

    EmbedEta(lambda d, t: None, True)(0, 0)  # (an index run that found no new chunk)
    assert capsys.readouterr().err == ""
    EmbedEta(lambda d, t: None, True)(0, 1)
    assert capsys.readouterr().err.startswith("keyword search is ready; embedding 1 chunk for")


def _seconds(line: str) -> float:
    import re

    m = re.search(r"about ([\d.]+) (s|min|h) left", line)
    return float(m.group(1)) * {"s": 1, "min": 60, "h": 3600}[m.group(2)]
