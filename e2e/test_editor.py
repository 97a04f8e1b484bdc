"""The code panels' editor (web/editor.js): edits are marked and kept until the user agrees to lose
them, a run's error is marked on its line, and Run reads the settings back from the script."""
import json
import os
import random
import re

from e2e.browser import code_text, code_text_js
from e2e.conftest import ARTIFACTS, text, wait_for


def open_page(page, site_url, settings=""):
    """The page with its editor up (Python may still be loading: these checks need none of it)."""
    page.goto(site_url + settings)
    wait_for(page, f"{code_text_js()}.then((code) => code.includes('import webgrad'))", 20)


def test_settings_read_back_from_the_script(page, site_url):
    """script.js's configFrom against the settings scriptFor wrote, on random settings; an edit to a
    value the controls do not offer is not read back (and the script is then not the controls')."""
    open_page(page, site_url)
    found = page.evaluate("""async (seed) => {
      const { CHOICES, DEFAULTS, FEATURES, configFrom, scriptFor } = await import('./script.js');
      let state = seed;
      const random = () => (state = (state * 48271) % 2147483647) / 2147483647;
      const pick = (options) => options[Math.floor(random() * options.length)];
      const cases = [];
      for (let i = 0; i < 40; i++) {
        const settings = { ...DEFAULTS };
        for (const [key, options] of Object.entries(CHOICES)) settings[key] = pick(options);
        settings.hidden = Array.from({ length: Math.floor(random() * 7) }, () => 1 + Math.floor(random() * 64)).join(',');
        settings.noise = 5 * Math.floor(random() * 11);
        settings.ratio = 10 * (1 + Math.floor(random() * 9));
        settings.batch = 1 + Math.floor(random() * 64);
        settings.seed = Math.floor(random() * 100000);
        const features = Object.keys(FEATURES).filter(() => random() < 0.5);
        settings.features = (features.length ? features : ['x2']).join(',');
        const read = configFrom(scriptFor(settings), DEFAULTS);
        const odd = configFrom(scriptFor(settings).replace(/\\blr=[\\d.]+/, 'lr=0.05'), DEFAULTS);
        cases.push({ settings, read, odd });
      }
      return cases;
    }""", random.randrange(1, 2**31 - 1))
    defaults = page.evaluate("import('./script.js').then((m) => m.DEFAULTS)")
    for case in found:
        assert case["read"] == {"settings": case["settings"], "matches": True}
        assert case["odd"]["settings"] == {**case["settings"], "lr": defaults["lr"]}
        assert not case["odd"]["matches"]


def test_edits_are_marked_and_kept_until_the_user_agrees(page, site_url):
    open_page(page, site_url)
    assert page.is_hidden("[data-testid=code-edited]")

    # unedited code follows the controls without a question
    page.select_option("#lr", "0.1")
    wait_for(page, f"{code_text_js()}.then((code) => code.includes('lr=0.1,'))", 5)
    assert page.is_hidden("[data-testid=replace-code]")

    note = f"# my note {random.randrange(10**6)}"
    page.click("[data-testid=code]")
    page.keyboard.press("Control+End")
    page.keyboard.type("\n" + note)
    assert page.is_visible("[data-testid=code-edited]")

    # Keep my code: the code and the settings it was made from stay
    page.select_option("#optimizer", "sgd")
    page.wait_for_selector("[data-testid=replace-code]", state="visible", timeout=5_000)
    assert "Optimizer" in text(page, "replace-code")
    page.click("[data-testid=replace-code-keep]")
    page.wait_for_selector("[data-testid=replace-code]", state="hidden", timeout=5_000)
    assert page.input_value("#optimizer") == "adam" and "optimizer=adam" in page.url
    assert note in code_text(page) and "optim.Adam(" in code_text(page)
    assert page.is_visible("[data-testid=code-edited]")

    # Replace: the controls' script for the new setting, no longer edited
    page.fill("#hidden", "5, 3")
    page.press("#hidden", "Enter")   # a text field changes when it is committed
    page.wait_for_selector("[data-testid=replace-code]", state="visible", timeout=5_000)
    page.click("[data-testid=replace-code-replace]")
    wait_for(page, f"{code_text_js()}.then((code) => /nn\\.mlp\\(\\[[^,\\]]+, 5, 3, 2\\]/.test(code))", 5)
    assert note not in code_text(page) and "hidden=5,3" in page.url
    assert page.is_hidden("[data-testid=code-edited]")


def test_run_marks_the_error_line_and_reads_the_network_back(page, open_playground):
    open_playground()
    # an error on a random line: the editor marks that line
    line = random.randint(3, 12)
    script = "import webgrad as wg\n" + "x = wg.ones(2)\n" * (line - 2) + "y = x @ wg.ones(3)\nprint('unreached')\n"
    page.fill("[data-testid=code]", script)
    page.click("[data-testid=run-code]")
    wait_for(page, "document.querySelector('[data-testid=output]').textContent.includes('Traceback')", 30)
    assert f'File "train.py", line {line}' in text(page, "output")
    page.wait_for_selector("#code .cm-lintRange-error", timeout=5_000)
    marked = page.locator("#code .cm-line").evaluate_all(
        "lines => lines.flatMap((l, i) => l.querySelector('.cm-lintRange-error') ? [i + 1] : [])")
    assert marked == [line]
    assert page.locator("#code .cm-lint-marker-error").count() == 1

    # the controls' script with other hidden widths and learning rate: Run shows them in the controls
    page.select_option("[data-testid=dataset]", "xor")
    page.click("[data-testid=replace-code-replace]")   # the failed script was an edit
    wait_for(page, f"{code_text_js()}.then((code) => code.includes('wg.data.xor('))", 5)
    widths = [random.randint(1, 12) for _ in range(random.randint(1, 3))]
    # the model's line is nn.mlp([inputs, 8, 8, 2], ...): the hidden widths are its middle
    edited = re.sub(r"(nn\.mlp\(\[[^,\]]+), 8, 8(, 2\])", lambda m: m[1] + "".join(f", {w}" for w in widths) + m[2],
                    code_text(page)).replace("lr=0.03", "lr=0.1")
    assert edited.count("lr=0.1") == 1 and "".join(f", {w}" for w in widths) + ", 2]" in edited
    page.fill("[data-testid=code]", edited)
    assert page.is_visible("[data-testid=code-edited]")
    page.click("[data-testid=run-code]")
    wait_for(page, "document.querySelector('[data-testid=output]').textContent.includes('step 300:')"
                   " || /error/.test(document.querySelector('[data-testid=status]').textContent)", 60)
    assert "error" not in text(page, "status"), text(page, "output")
    assert page.input_value("#hidden") == ", ".join(map(str, widths)) and page.input_value("#lr") == "0.1"
    assert f"hidden={','.join(map(str, widths))}" in page.url and "lr=0.1" in page.url
    # the diagram follows the run's frames, which may be drawn after its last output line
    shape = " → ".join(map(str, [2, *widths, 2])) + " units"
    wait_for(page, f"document.querySelector('#shape').textContent === {shape!r}", 10)
    assert page.locator("#net .hid").count() == sum(min(w, 8) for w in widths)   # 8 units shown a layer
    # all the edit changed was settings: the code is the controls' again, its summary line too
    assert page.is_hidden("[data-testid=code-edited]")
    summary = code_text(page).splitlines()[0]
    assert summary.startswith("# xor") and f"{len(widths)} hidden layer" in summary

    # the code panels as a user sees them, on a laptop and on a phone
    os.makedirs(ARTIFACTS, exist_ok=True)
    for width, height in ((1440, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        panel = page.locator(".panel.code").first
        panel.screenshot(path=os.path.join(ARTIFACTS, f"editor-{width}x{height}.png"))
        box = panel.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width, json.dumps({"viewport": width, "panel": box})


# A code panel's line numbers and lines as drawn: [[number, top], ...] and [top, ...] (CSS pixels,
# from the page's top); the gutter's hidden element that sizes its width is left out.
LINE_TOPS = """(id) => {
  const root = document.getElementById(id).shadowRoot;
  const top = (e) => e.getBoundingClientRect().top + scrollY;
  const numbers = [...root.querySelectorAll('.cm-lineNumbers .cm-gutterElement')].filter((e) => e.style.visibility !== 'hidden');
  return [numbers.map((e) => [Number(e.textContent), top(e)]), [...root.querySelectorAll('.cm-content .cm-line')].map(top)];
}"""


def assert_numbers_beside_lines(page, panel):
    numbers, lines = page.evaluate(LINE_TOPS, panel)
    assert len(lines) >= 20 and [n for n, _ in numbers] == list(range(1, len(lines) + 1)), (numbers, lines)
    misplaced = [(n, round(y - lines[n - 1], 1)) for n, y in numbers if abs(y - lines[n - 1]) > 1]
    assert not misplaced, f"{panel}: line numbers off their lines by (number, pixels): {misplaced}"


def test_line_numbers_sit_beside_their_lines_from_the_first_load(page, site_url):
    """Tracebacks name lines by number, so the gutter must number the lines drawn, before the page is
    scrolled or the editor clicked: the toy's panel (below the fold at both widths), and the language
    model's, whose script comes into its tab once Python is ready, and after the tab is shown again."""
    for width, height in ((1440, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        open_page(page, site_url)
        page.wait_for_timeout(500)
        assert page.evaluate("document.getElementById('code').getBoundingClientRect().top > innerHeight")
        assert_numbers_beside_lines(page, "code")
    page.click("[data-testid=tab-lm]")
    wait_for(page, "/Ready|rror/.test(document.querySelector('[data-testid=lm-status]').textContent)", 120)
    page.wait_for_timeout(500)
    assert_numbers_beside_lines(page, "lm-code")
    page.click("[data-testid=tab-playground]")
    page.click("[data-testid=tab-lm]")
    page.wait_for_timeout(500)
    assert_numbers_beside_lines(page, "lm-code")
    assert page.evaluate("scrollY") == 0


def test_the_language_model_panel_asks_too_and_marks_its_errors(page, open_playground):
    open_playground("#view=lm")
    wait_for(page, "/Ready|rror/.test(document.querySelector('[data-testid=lm-status]').textContent)", 90)
    assert "Ready" in text(page, "lm-status")
    script = code_text(page, "lm-code")
    assert "learning_rate=0.003" in script and page.is_hidden("[data-testid=lm-code-edited]")

    page.click("[data-testid=lm-code]")
    page.keyboard.press("Control+Home")
    page.keyboard.type("# mine\n")
    assert page.is_visible("[data-testid=lm-code-edited]")
    page.select_option("#lm-lr", "0.01")
    page.click("[data-testid=replace-code-keep]")
    assert page.input_value("#lm-lr") == "0.003" and code_text(page, "lm-code") == "# mine\n" + script

    # an error on a random line of the user's script is marked there
    line = random.randint(2, 9)
    page.fill("[data-testid=lm-code]", "import webgrad as wg\n" + "\n" * (line - 2) + "wg.ones(2).reshape(3)\n")
    page.click("[data-testid=lm-run-code]")
    wait_for(page, "document.querySelector('[data-testid=lm-output]').textContent.includes('RuntimeError')", 30)
    page.wait_for_selector("#lm-code .cm-lintRange-error", timeout=5_000)
    marked = page.locator("#lm-code .cm-line").evaluate_all(
        "lines => lines.flatMap((l, i) => l.querySelector('.cm-lintRange-error') ? [i + 1] : [])")
    assert marked == [line]

    # Replace: the controls' script for the new rate
    page.select_option("#lm-lr", "0.01")
    page.click("[data-testid=replace-code-replace]")
    wait_for(page, f"{code_text_js('lm-code')}.then((code) => code.includes('learning_rate=0.01'))", 60)
    assert page.is_hidden("[data-testid=lm-code-edited]") and "lr=0.01" in page.url
