// The code panels' editor: CodeMirror 6 with Python highlighting, line numbers and a run's error marked
// on its line; it knows whether the user edited the script the controls wrote, and asks before a
// control replaces edited code. build.py bundles this file with CodeMirror into the site's editor.js.
//
// Each editor lives in a shadow root: CodeMirror then gives its styles to the browser as constructed
// style sheets, which the page's Content-Security-Policy (style-src 'self', no inline <style>) allows.
import { defaultKeymap, history, historyKeymap, indentWithTab } from '@codemirror/commands';
import { python } from '@codemirror/lang-python';
import { bracketMatching, defaultHighlightStyle, indentOnInput, indentUnit, syntaxHighlighting } from '@codemirror/language';
import { lintGutter, setDiagnostics } from '@codemirror/lint';
import { EditorState } from '@codemirror/state';
import {
  drawSelection, EditorView, highlightActiveLine, highlightActiveLineGutter, keymap, lineNumbers,
} from '@codemirror/view';

const MONO = 'ui-monospace, "DejaVu Sans Mono", "Liberation Mono", Menlo, Consolas, monospace';
const theme = EditorView.theme({
  '&': { height: '100%', fontSize: '0.8rem', backgroundColor: '#fbfbfc', border: '1px solid #e4e7ec', borderRadius: '8px' },
  '&.cm-focused': { outline: '2px solid #9cc5e4' },
  '.cm-scroller': { fontFamily: MONO, lineHeight: '1.45', overflow: 'auto' },
  '.cm-gutters': { backgroundColor: '#f2f4f7', color: '#98a2b3', borderRight: '1px solid #e4e7ec', borderRadius: '8px 0 0 8px' },
  '.cm-activeLine, .cm-activeLineGutter': { backgroundColor: '#eef4fa' },
  '.cm-lintRange-error': { backgroundColor: '#fde8e8' },
});

// The line of the user's script that a Python traceback ends in (its last frame in filename), or null.
export function errorLine(traceback, filename) {
  const lines = [...traceback.matchAll(/File "([^"]+)", line (\d+)/g)].filter((m) => m[1] === filename);
  return lines.length ? Number(lines.at(-1)[2]) : null;
}

// Asks the user a question in the page's <dialog id=id> (its reason in `${id}-why`): resolves true for
// the yesId button, false for the noId one (or Escape); the editor's "Replace your edited code?" and
// MNIST's "Start a fresh model?". A button answers at once, so the page has acted on it by the time
// the click is over.
export function askInDialog(id, why, yesId, noId) {
  const dialog = document.getElementById(id);
  document.getElementById(`${id}-why`).textContent = why;
  return new Promise((resolve) => {
    const answer = (yes) => {
      dialog.onclose = null;
      dialog.close();
      resolve(yes);
    };
    document.getElementById(yesId).onclick = () => answer(true);
    document.getElementById(noId).onclick = () => answer(false);
    dialog.onclose = () => resolve(false);   // Escape
    dialog.showModal();
  });
}

// An editor in host (an empty element). testid and label go on the editable element (tests type
// into it), filename is the script's name in tracebacks, run is called on Ctrl+Enter (Cmd+Enter), and
// badge (an element) is shown while the text differs from what show() last put there.
export function codeEditor(host, { testid, label, filename, run, badge }) {
  let generated = '';
  const root = host.attachShadow({ mode: 'open' });
  const view = new EditorView({
    root,
    parent: root,
    state: EditorState.create({
      extensions: [
        lineNumbers(), highlightActiveLineGutter(), lintGutter(), history(), drawSelection(), highlightActiveLine(),
        indentOnInput(), bracketMatching(), indentUnit.of('    '), EditorState.tabSize.of(4),
        python(), syntaxHighlighting(defaultHighlightStyle, { fallback: true }), theme,
        keymap.of([{ key: 'Mod-Enter', run: () => (run(), true) }, indentWithTab, ...defaultKeymap, ...historyKeymap]),
        EditorView.contentAttributes.of({ 'data-testid': testid, 'aria-label': label }),
        EditorView.updateListener.of((update) => update.docChanged && showEdited()),
      ],
    }),
  });
  const text = () => view.state.doc.toString();
  const showEdited = () => { badge.hidden = text() === generated; };
  // CodeMirror measures its lines only while it is in the window: an editor below the fold (or in a
  // hidden tab) would space its line numbers at a guessed line height until scrolled to, and in a
  // full-page screenshot or a print. A scroll target makes it measure wherever it is, and a snapshot
  // of its own scroll position scrolls nothing else: one goes with each new text and each new layout
  // (a tab shown, a new width), the times its lines' heights change.
  new ResizeObserver(() => view.dispatch({ effects: view.scrollSnapshot() })).observe(host);

  return {
    get text() { return text(); },
    get edited() { return text() !== generated; },
    // Puts the controls' script in the editor: not edited, no error marked.
    show(script) {
      generated = script;
      view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: script }, effects: view.scrollSnapshot() });
      view.dispatch(setDiagnostics(view.state, []));
      showEdited();
    },
    // Marks the line of the user's script that a traceback ends in (and clears the mark for none).
    markError(traceback) {
      const line = traceback && errorLine(traceback, filename);
      const diagnostics = [];
      if (line && line <= view.state.doc.lines) {
        const { from, to, text: code } = view.state.doc.line(line);
        diagnostics.push({ from: from + code.search(/\S|$/), to, severity: 'error', message: traceback.trim().split('\n').at(-1) });
      }
      view.dispatch(setDiagnostics(view.state, diagnostics));
    },
    // Whether the controls may replace the text: yes when it is not edited, else the user's answer.
    mayReplace(why) {
      return this.edited ? askInDialog('replace-code', why, 'replace-code-replace', 'replace-code-keep') : Promise.resolve(true);
    },
  };
}

// The text of the editor in host (for the page's tests, which read it through DevTools).
export function textOf(host) {
  return EditorView.findFromDOM(host.shadowRoot.querySelector('.cm-editor')).state.doc.toString();
}
