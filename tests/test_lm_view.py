"""The language-model view's Python (web/lm_view.py), natively: an evaluation tells the page how far
it got and gives up when the page wants a newer model, and a text of the user's that makes no model
leaves the Session and the text file as they were."""
import json

import pytest

from conftest import seed, tag

TINY = dict(n_layer=1, n_head=2, n_embd=32, block_size=16, lr=0.01, batch=16, steps=50, every=25, replayed=False)
OWN = "It was the best of times, it was the worst of times.\n" * 40


@pytest.fixture
def lm_view(page_module, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)   # where the view's script reads the user's text (CUSTOM_FILE)
    return page_module("lm_view")


def test_an_evaluation_says_each_batch_done_and_gives_the_scripts_loss(lm_view):
    session = lm_view.Session(lm_view.script({**TINY, "corpus": "names", "seed": seed()}))
    heard = []
    steps, loss = session.evaluate(lambda done, total: heard.append((done, total)) or True)
    assert heard == [(done, 10) for done in range(10)], tag(heard)
    assert (steps, loss) == (0, pytest.approx(session.ns["validation_loss"](), rel=1e-5)), tag()
    assert session.model.training and "batch" not in vars(session.data), tag("the model and its data as they were")


def test_an_evaluation_gives_up_when_the_page_says_so(lm_view):
    session = lm_view.Session(lm_view.script({**TINY, "corpus": "names", "seed": seed()}))
    heard = []
    assert session.evaluate(lambda done, total: heard.append(done) or done < 3) is None, tag()
    assert heard == [0, 1, 2, 3], tag(heard)
    assert session.val_loss is None and session.model.training and "batch" not in vars(session.data), tag()


def test_a_text_that_makes_no_model_changes_nothing(lm_view, tmp_path):
    view = lm_view.View()
    settings = json.dumps({**TINY, "corpus": "custom", "seed": seed()})
    (tmp_path / lm_view.CUSTOM_FILE).write_text("a")
    with pytest.raises(lm_view.Refused, match=r"too short: 1 character;"):
        view.configure(settings)
    assert view.session is None and not (tmp_path / lm_view.CUSTOM_FILE).exists(), tag("no text of the user's kept")

    (tmp_path / lm_view.CUSTOM_FILE).write_text(OWN)
    view.configure(settings)
    made = view.session
    (tmp_path / lm_view.CUSTOM_FILE).write_text("to be or not\n" * 10)
    with pytest.raises(lm_view.Refused, match=r"too short: 130 characters;"):
        view.configure(settings)
    assert view.session is made and (tmp_path / lm_view.CUSTOM_FILE).read_text() == OWN, tag("the text that made it")
    json.loads(view.configure(settings))   # the next settings make a model of that text
    assert view.session.ns["text"] == OWN, tag()
