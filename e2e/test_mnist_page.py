"""The page's MNIST view end to end, in headless Chromium (WebGPU on SwiftShader here): an MLP
trained in the page, its test digits and drawing pad, and its weights file, checked natively.

One trained page serves every test (training is the slow part). Its seed is drawn afresh each run
(the failure messages name it): the settings must work for any seed."""
import math
import os
import random
import time

import pytest

import webgrad as wg
from e2e.conftest import opened_view, save_screenshot, text, wait_for, wait_for_text
from webgrad import nn
from webgrad.data.mnist_dataset import to_input

SEED = random.randrange(100000)
STEPS = 150   # at batch 128 and Adam lr 0.003: 0.92 or more on the first 1000 test images, whatever the seed
SETTINGS = f"#view=mnist&model=mlp&lr=0.003&batch=128&steps={STEPS}&test=1000&seed={SEED}"
TEST_IMAGES = 1000


def status(page):
    return text(page, "mnist-status")


def accuracy(page):
    return float(text(page, "mnist-accuracy"))


def wait_for_status(page, pattern, timeout_s):
    wait_for_text(page, "mnist-status", pattern, timeout_s, SEED)


@pytest.fixture(scope="module")
def trained(browser, site_url):
    """The MNIST view after training the MLP for STEPS steps: (page, seconds to load, seconds to train)."""
    t0 = time.monotonic()
    with opened_view(browser, site_url + SETTINGS, "mnist", 90, SEED) as page:
        wait_for(page, "document.querySelector('[data-testid=mnist-accuracy]').textContent !== '–'", 30)
        t1 = time.monotonic()
        page.click("[data-testid=mnist-train]")
        wait_for_status(page, "Trained", 150)
        yield page, t1 - t0, time.monotonic() - t1


def draw(page, strokes):
    """Mouse strokes on the drawing pad; each stroke is a list of (x, y) in [0, 1] of its size."""
    page.click("[data-testid=draw-clear]")
    box = page.locator("[data-testid=draw-canvas]").bounding_box()
    for stroke in strokes:
        points = [(box["x"] + x * box["width"], box["y"] + y * box["height"]) for x, y in stroke]
        page.mouse.move(*points[0])
        page.mouse.down()
        for point in points[1:]:
            page.mouse.move(*point, steps=4)
        page.mouse.up()


def probabilities(page):
    """The pad's digit: (predicted digit shown, its 10 probabilities, the 28x28 image the model saw)."""
    guessed = "/^\\d$/.test(document.querySelector('[data-testid=prediction]').textContent)"   # not the hint
    wait_for(page, guessed, 20)
    page.wait_for_timeout(300)   # a prediction of a stroke's later part may be on its way
    wait_for(page, guessed, 20)
    probs = [float(v) for v in page.eval_on_selector_all("[data-testid=probabilities] [data-p]",
                                                        "rows => rows.map(r => r.dataset.p)")]
    seen = page.eval_on_selector("[data-testid=model-input]", "c => Array.from(c.getContext('2d')"
                                 ".getImageData(0, 0, 28, 28).data.filter((_, i) => i % 4 === 3))")
    return int(text(page, "prediction")), probs, bytes(seen)


def download_weights(page, path):
    with page.expect_download() as download:
        page.click("[data-testid=mnist-download]")
    download.value.save_as(path)
    return path


def test_the_mlp_trains_to_90_percent_on_the_test_digits(trained):
    page, load_s, train_s = trained
    print(f"seed {SEED}: page and data ready in {load_s:.1f} s, {STEPS} steps in {train_s:.1f} s "
          f"({text(page, 'mnist-speed')} steps/s at the end), test accuracy {accuracy(page)}")
    save_screenshot(page, "mnist-trained.png")
    assert accuracy(page) >= 0.90, f"seed {SEED}: test accuracy {accuracy(page)} after {STEPS} steps"
    assert text(page, "mnist-step-count") == str(STEPS)
    progress = page.locator("[data-testid=mnist-progress]")
    assert progress.evaluate("p => [p.value, p.max]") == [STEPS, STEPS]

    # the confusion matrix and the digit grid come from the same predictions as the accuracy
    cells = page.eval_on_selector_all("[data-testid=confusion] tr", "rows => rows.slice(1).map(r => "
                                      "Array.from(r.cells).slice(1).map(c => Number(c.textContent)))")
    assert sum(map(sum, cells)) == TEST_IMAGES
    assert sum(cells[i][i] for i in range(10)) / TEST_IMAGES == pytest.approx(accuracy(page), abs=5e-4)
    digits = page.locator("[data-testid=digits] figure")
    assert digits.count() == 60
    wrong = page.locator("[data-testid=digits] figure.wrong")
    assert 0 < sum(cells[i][j] for i in range(10) for j in range(10) if i != j)
    for k in range(wrong.count()):   # a mistake's caption is true→guess, two different digits
        true, guess = wrong.nth(k).text_content().split("→")
        assert true != guess

    page.check("input[name=digits][value=wrong]")
    assert 0 < page.locator("[data-testid=digits] figure").count() == page.locator("[data-testid=digits] figure.wrong").count()
    page.check("input[name=digits][value=all]")


def test_a_drawn_digit_gets_probabilities(trained):
    page, _, _ = trained
    draw(page, [[(0.5, 0.15), (0.5, 0.85)]])   # a one
    digit, probs, seen = probabilities(page)
    save_screenshot(page, "mnist-drawn.png")
    assert len(probs) == 10 and all(0 <= p <= 1 for p in probs)
    assert sum(probs) == pytest.approx(1, abs=1e-4)
    assert digit == max(range(10), key=probs.__getitem__)
    assert digit == 1, f"seed {SEED}: a vertical stroke read as {digit} ({probs})"
    # the model saw it as MNIST digits look: ink centred by its mass, 20 pixels tall
    mass = sum(seen)
    rows = [y for y in range(28) if any(seen[28 * y:28 * y + 28])]
    assert mass > 0 and 18 <= len(rows) <= 22
    assert abs(sum(v * (i // 28) for i, v in enumerate(seen)) / mass - 14) < 1.5
    assert abs(sum(v * (i % 28) for i, v in enumerate(seen)) / mass - 14) < 1.5


def test_downloaded_weights_give_the_same_model_natively(trained, tmp_path):
    page, _, _ = trained
    draw(page, [[(0.25, 0.2), (0.75, 0.2), (0.45, 0.85)]])   # a seven
    _, page_probs, seen = probabilities(page)
    path = download_weights(page, tmp_path / "weights.safetensors")

    state = wg.load(path, device="cpu")
    model = nn.mnist_mlp(device="cpu")
    assert {k: tuple(v.shape) for k, v in state.items()} == {k: tuple(v.shape) for k, v in model.state_dict().items()}
    model.load_state_dict(state)
    with wg.no_grad():
        x = to_input(wg.frombuffer(seen, wg.uint8, device="cpu").reshape(1, 1, 28, 28))
        native_probs = wg.softmax(model(x), 1).reshape(-1).tolist()
        test = wg.data.mnist("test", device="cpu", limit=TEST_IMAGES)
        images, labels = test[:]
        native_accuracy = (model(images).argmax(1) == labels).float().mean().item()
    assert native_probs == pytest.approx(page_probs, abs=1e-4)
    # GPU and CPU round differently, so a near tie may go the other way: allow one image
    assert abs(native_accuracy - accuracy(page)) <= 1 / TEST_IMAGES, f"seed {SEED}"


def test_loading_weights_restores_the_model(trained, tmp_path):
    page, _, _ = trained
    trained_accuracy = text(page, "mnist-accuracy")
    path = download_weights(page, tmp_path / "weights.safetensors")
    page.click("[data-testid=mnist-reset]")
    wait_for(page, "document.querySelector('[data-testid=mnist-step-count]').textContent === '0'", 20)
    wait_for_status(page, "Ready", 20)
    wait_for(page, f"document.querySelector('[data-testid=mnist-accuracy]').textContent !== '{trained_accuracy}'", 20)
    assert accuracy(page) < 0.5, "a fresh model should guess"

    page.set_input_files("[data-testid=mnist-upload]", str(path))
    wait_for_status(page, "Loaded", 20)
    wait_for(page, f"document.querySelector('[data-testid=mnist-accuracy]').textContent === '{trained_accuracy}'", 20)
    assert page.input_value("[data-testid=mnist-model]") == "mlp"


def test_bad_weights_files_say_why(trained, tmp_path):
    page, _, _ = trained
    before = text(page, "mnist-accuracy")
    corrupt = tmp_path / "corrupt.safetensors"
    corrupt.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}")
    page.set_input_files("[data-testid=mnist-upload]", str(corrupt))
    wait_for_status(page, "rror", 20)
    assert "corrupt.safetensors: not a valid safetensors file" in status(page)

    def verdict(name):   # the previous file's error is shown until this one is read: wait for this one's
        wait_for(page, f"(t => t.includes('{name}') && !t.startsWith('Loading'))"
                       "(document.querySelector('[data-testid=mnist-status]').textContent)", 30)
        return status(page)

    noise = tmp_path / "noise.safetensors"
    noise.write_bytes(os.urandom(20 * 2**20))
    page.set_input_files("[data-testid=mnist-upload]", str(noise))
    said = verdict("noise.safetensors")
    assert "noise.safetensors: not a safetensors file" in said and "header length" not in said, said

    hidden = random.randrange(1, 128)   # the page's MLP has 128
    other = tmp_path / "other.safetensors"
    wg.save(nn.Sequential(nn.Flatten(), nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, 10)).to("cpu").state_dict(),
            other)
    page.set_input_files("[data-testid=mnist-upload]", str(other))
    said = verdict("other.safetensors")
    assert f"made for a different model: expected 1.weight 128x784, got {hidden}x784" in said, said
    assert text(page, "mnist-accuracy") == before, "a bad file must leave the model as it was"
    assert page.is_enabled("[data-testid=mnist-train]")


def test_tabs_switch_views_and_keep_their_links(trained):
    page, _, _ = trained
    page.click("[data-testid=tab-playground]")
    assert page.is_visible("#view-playground") and not page.is_visible("#view-mnist")
    assert "view=mnist" not in page.url and "dataset=" in page.url
    page.click("[data-testid=tab-mnist]")
    assert page.is_visible("[data-testid=draw-canvas]") and not page.is_visible("#view-playground")
    assert f"seed={SEED}" in page.url and "model=mlp" in page.url
    assert math.isfinite(accuracy(page))
