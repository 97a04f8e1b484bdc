// What the page's views share: element lookup, files in and out, and the code panels' keys and output.

export const $ = (id) => document.getElementById(id);

// Offers bytes to the user as a download named name.
export function saveFile(data, name) {
  const link = document.createElement('a');
  link.href = URL.createObjectURL(new Blob([data], { type: 'application/octet-stream' }));
  link.download = name;
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
}

// The file chosen in a file input, as {name, data: Uint8Array}, or null; the input is cleared, so
// that choosing the same file again is a change too.
export async function takeFile(input) {
  const file = input.files[0];
  input.value = '';
  return file ? { name: file.name, data: new Uint8Array(await file.arrayBuffer()) } : null;
}

// A code panel's keys: Tab indents, as an editor would, instead of leaving the text area;
// Ctrl+Enter (Cmd+Enter) calls run.
export function codeKeys(area, run) {
  area.addEventListener('keydown', (e) => {
    if (e.key === 'Tab') {
      e.preventDefault();
      area.setRangeText('    ', area.selectionStart, area.selectionEnd, 'end');
    } else if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      run();
    }
  });
}

// A line of a code panel's output (kind: 'error' or 'note' colours it), kept in view.
export function printTo(output, text, kind) {
  const line = document.createElement('span');
  line.textContent = text + '\n';
  if (kind) line.className = kind;
  output.append(line);
  output.scrollTop = output.scrollHeight;
}

// A tab's status line shows text styled by kind ('', 'error', ...).
export function showStatus(id, text, kind = '') {
  $(id).textContent = text;
  $(id).className = `status ${kind}`;
}

// A tab's Train/Pause toggle (`${prefix}-train`, `${prefix}-pause`), and the controls (ids) a busy
// worker disables.
export function showBusy(prefix, ids, busy, training) {
  for (const id of ids) $(id).disabled = busy;
  $(`${prefix}-pause`).disabled = busy || !training;
  $(`${prefix}-train`).hidden = training;
  $(`${prefix}-pause`).hidden = !training;
}
