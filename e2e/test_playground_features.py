"""The toy view's TensorFlow-Playground features in the page: input features, per-unit heatmaps and
weights in the diagram, regression sets, the presets, and the drawing options."""
from e2e.browser import code_text
from e2e.conftest import pause, steps, text, wait_for


def number(page, testid):
    return float(text(page, testid))


def play_until(page, condition, timeout_s):
    page.click("[data-testid=train]")
    wait_for(page, condition, timeout_s)
    pause(page)


def diagram(page):
    """How many unit heatmaps and weight lines the diagram draws, and the weights' hover texts."""
    return page.evaluate("""() => ({
        maps: document.querySelectorAll('#net image.unit-map').length,
        weights: [...document.querySelectorAll('#net line.weight title')].map((t) => t.textContent),
        names: [...document.querySelectorAll('#net text.name')].map((t) => t.textContent)})""")


# toy_plots.js's colours of the output at full strength (0.6 of the way from white)
ORANGE_TINT, BLUE_TINT = [249, 190, 122], [107, 173, 215]


def corners(page):
    """The output plot's colours near its four corners, away from the data."""
    return page.evaluate("""() => {
        const ctx = document.querySelector('#boundary').getContext('2d');
        return [[40, 14], [386, 14], [40, 360], [386, 360]].map(([x, y]) => [...ctx.getImageData(x, y, 1, 1).data.slice(0, 3)]);
    }""")


def loss_axis(page):
    """What the loss chart draws left of its y axis's ticks, where only the axis's name belongs (which
    pixels: a string of 0s and 1s, row by row), and how many pixels it draws on that axis beside the
    plot (its ticks and their labels; the x axis's first label reaches under it)."""
    return page.evaluate("""() => {
        const canvas = document.querySelector('#chart canvas');
        const box = canvas.getBoundingClientRect();
        const axis = document.querySelectorAll('#chart .u-axis')[1].getBoundingClientRect();
        const px = (v, from) => Math.floor((v - from) * canvas.width / box.width);
        const drawn = (x0, x1, y0, y1) => { const pixels = canvas.getContext('2d').getImageData(x0, y0, x1 - x0, y1 - y0).data;
                                            return Array.from({length: pixels.length / 4}, (_, i) => (pixels[4 * i + 3] > 0 ? 1 : 0)); };
        const [left, right] = [axis.left, axis.right].map((x) => px(x, box.left));
        const [top, bottom] = [axis.top, axis.bottom].map((y) => px(y, box.top));
        return {name: drawn(0, left, 0, canvas.height).join(''),
                ticks: drawn(left, right - 1, top, bottom).filter(Boolean).length}; }""")   # right - 1: not the plot's edge


def test_a_feature_toggle_widens_the_input_and_trains(page, open_playground, screenshot):
    open_playground("#dataset=circles&hidden=8,8&seed=3")
    before = diagram(page)
    assert before["maps"] == 2 + 8 + 8, "a heatmap per input and hidden unit"
    assert len(before["weights"]) == 2 * 8 + 8 * 8 + 8 * 2
    assert before["names"] == ["x₁", "x₂", "class 0", "class 1"]

    # a fresh model's output is shaded by p; discretized, each point is one class's full tint
    assert not all(c in (ORANGE_TINT, BLUE_TINT) for c in corners(page)), corners(page)
    page.check("[data-testid=discretize]")
    wait_for(page, "location.hash.includes('discretize=1')", 5)
    assert all(c in (ORANGE_TINT, BLUE_TINT) for c in corners(page)), corners(page)
    page.uncheck("[data-testid=discretize]")

    page.click("[data-testid=feature-x1sq]")
    page.click("[data-testid=feature-x2sq]")
    wait_for(page, "location.hash.includes('features=x1,x2,x1sq,x2sq')", 5)
    code = code_text(page)
    assert 'FEATURES = ["x1", "x2", "x1sq", "x2sq"]' in code and "nn.mlp([len(FEATURES), 8, 8, 2]" in code
    wait_for(page, "document.querySelector('#shape').textContent.startsWith('4 → 8 → 8 → 2')", 20)
    wait_for(page, "document.querySelectorAll('#net image.unit-map').length === 4 + 8 + 8", 20)
    after = diagram(page)
    assert len(after["weights"]) == 4 * 8 + 8 * 8 + 8 * 2
    assert after["names"] == ["x₁", "x₂", "x₁²", "x₂²", "class 0", "class 1"]
    weight = after["weights"][0]
    assert weight.startswith("weight ") and "x₁ → unit 1 of layer 1" in weight
    assert abs(float(weight.split()[1].rstrip(":"))) <= 1, "a fresh layer's weights are within 1/sqrt(fan-in)"

    start_loss = number(page, "test-loss")
    play_until(page, "Number(document.querySelector('[data-testid=accuracy]').textContent) >= 0.98", 60)
    assert number(page, "test-loss") < start_loss / 2
    assert diagram(page)["weights"] != after["weights"], "the lines follow the trained weights"

    # the drawing options change the plot only: the model and its step count stay
    trained = steps(page)
    page.check("[data-testid=testdata]")
    wait_for(page, "location.hash.includes('testdata=1')", 5)
    assert steps(page) == trained
    screenshot("features-circles.png")


def test_a_regression_set_trains(page, open_playground):
    open_playground()
    page.select_option("[data-testid=problem]", "regression")
    wait_for(page, "location.hash.includes('dataset=plane')", 5)
    wait_for(page, "document.querySelector('#score-label').textContent === 'Test R² (untrained)'", 30)
    wait_for(page, "document.querySelector('#shape').textContent.startsWith('2 → 1 units')", 20)
    assert diagram(page)["names"] == ["x₁", "x₂", "value"]
    assert "F.mse_loss(" in code_text(page)
    options = page.evaluate("[...document.querySelectorAll('#dataset option')].filter((o) => !o.hidden).map((o) => o.value)")
    assert options == ["plane", "multigauss"]

    page.click("[data-testid=step]")   # a frame of the plane's model, after one step
    wait_for(page, "document.querySelector('[data-testid=step-count]').textContent === '1'", 20)
    assert page.text_content("#score-label") == "Test R²", "past step 0 the score is the model's"
    start_loss = number(page, "test-loss")
    play_until(page, f"Number(document.querySelector('[data-testid=test-loss]').textContent) < {start_loss / 10}", 60)
    assert number(page, "accuracy") > 0.9, "R² of the trained model"


def test_spirals_learn_at_their_preset(page, open_playground, screenshot):
    open_playground()
    page.select_option("[data-testid=dataset]", "spirals")
    wait_for(page, "location.hash.includes('dataset=spirals')", 5)
    assert "features=x1,x2,sinx1,sinx2" in page.url and "hidden=16,16" in page.url
    assert "sin" in text(page, "preset-why")
    wait_for(page, "document.querySelector('#shape').textContent.startsWith('4 → 16 → 16 → 2')", 20)
    play_until(page, "Number(document.querySelector('[data-testid=accuracy]').textContent) >= 0.95", 90)
    assert steps(page) <= 1500, f"spirals took {steps(page)} steps to reach 0.95 at the preset"
    screenshot("spirals-preset.png")


def test_training_that_diverges_stops_and_says_why(page, open_playground, screenshot):
    """A learning rate and regularization far too large for SGD: the loss leaves the numbers within a
    few steps. Play stops there and says what to change; the readouts, the plot and the loss chart
    keep the last frame whose loss was a number, rather than NaN and a black plot."""
    open_playground("#dataset=plane&lr=1&optimizer=sgd&l2=0.1&l1=0.1")
    assert page.text_content("#score-label") == "Test R² (untrained)"
    # The loss grows some hundredfold a step: the axis makes room for long ticks (at 3e10, "3.0e+10" was
    # drawn over its name), and past 1e33 it has ticks at all (uPlot's own spacings end at 5e32).
    name_only = loss_axis(page)["name"]   # a fresh model's loss: short ticks
    assert "1" in name_only
    for huge in (1e10, 1e33):
        while float(text(page, "loss")) < huge and (step := steps(page)) < 30:
            page.click("[data-testid=step]")
            wait_for(page, f"document.querySelector('[data-testid=step-count]').textContent === '{step + 1}'", 20)
        assert huge <= float(text(page, "loss")) < 1e38, text(page, "loss")
        axis = loss_axis(page)
        assert axis["ticks"] > 0 and axis["name"] == name_only, f"the loss axis at {text(page, 'loss')}: {axis['ticks']}"
    page.click("[data-testid=train]")
    wait_for(page, "document.querySelector('[data-testid=status]').textContent.startsWith('Training diverged')", 60)
    assert text(page, "status").endswith("lower the learning rate or the regularization, then press Reset"), text(page, "status")
    page.wait_for_selector("[data-testid=train]", state="visible", timeout=10_000)   # Play is off
    stopped_at = steps(page)
    page.wait_for_timeout(1000)
    assert steps(page) == stopped_at, "training went on after the loss became NaN"
    assert text(page, "status").startswith("Training diverged at step "), text(page, "status")
    for testid in ("accuracy", "test-loss", "loss"):
        assert text(page, testid) not in ("NaN", "Infinity", "-Infinity"), (testid, text(page, testid))
        number(page, testid)
    assert all(c != [0, 0, 0] for c in corners(page)), corners(page)
    assert page.evaluate("document.querySelectorAll('#chart .u-axis').length") == 2, "the loss chart keeps its axes"
    screenshot("diverged-1440.png")

    page.click("[data-testid=reset]")
    wait_for(page, "document.querySelector('[data-testid=status]').textContent.startsWith('Ready')", 30)
    assert steps(page) == 0 and page.text_content("#score-label") == "Test R² (untrained)"


def test_a_typed_seed_or_network_that_will_not_do_is_refused_and_says_what_will(page, open_playground):
    open_playground("#dataset=xor&seed=42")
    shape = page.text_content("#shape")
    for typed in ("-5", "123456", "1e3", ""):
        page.fill("#seed", typed)
        page.press("#seed", "Tab")   # a field changes when it is committed
        wait_for(page, "document.querySelector('[data-testid=seed-note]').textContent !== ''", 5)
        assert text(page, "seed-note") == f"“{typed}” will not do: a whole number from 0 to 99999. Still 42."
        assert page.input_value("#seed") == "42" and "seed=42" in page.url and "wg.manual_seed(42)" in code_text(page)
        assert page.is_visible("[data-testid=seed-note]")
    page.fill("#seed", "7")
    page.press("#seed", "Tab")
    wait_for(page, "location.hash.includes('seed=7')", 5)
    assert text(page, "seed-note") == "" and page.is_hidden("[data-testid=seed-note]")

    page.fill("#hidden", "abc")
    page.press("#hidden", "Enter")
    wait_for(page, "document.querySelector('[data-testid=hidden-note]').textContent !== ''", 5)
    assert text(page, "hidden-note").startswith("“abc” will not do: the network keeps 8, 8 until this is a list such as 8, 8")
    assert page.is_visible("[data-testid=hidden-note]") and "invalid" in page.get_attribute("#hidden", "class")
    assert page.text_content("#shape") == shape
    page.fill("#hidden", "4")
    page.press("#hidden", "Enter")
    wait_for(page, "document.querySelector('#shape').textContent === '2 → 4 → 2 units'", 20)
    assert text(page, "hidden-note") == "" and "invalid" not in page.get_attribute("#hidden", "class")
