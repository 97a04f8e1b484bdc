// A view's settings read from a link (the URL hash), one way for every view: the playground
// (script.js), MNIST (mnist.js) and the language model (lm_settings.js) each name, per setting, how
// a link's value is read and what it may be.

// A setting a link may set: read(value) is the setting, or undefined where value will not do;
// allowed says what will, in words.
export const oneOf = (choices) => ({
  read: (value) => (choices.includes(value) ? value : undefined),
  allowed: `one of ${choices.join(', ')}`,
});
export const wholeNumber = (low, high) => ({
  read: (value) => (/^\d+$/.test(value) && Number(value) >= low && Number(value) <= high ? Number(value) : undefined),
  allowed: `a whole number from ${low} to ${high}`,
});
export const oneOfEach = (choices) => Object.fromEntries(Object.entries(choices).map(([key, list]) => [key, oneOf(list)]));

// Settings from a URL hash such as "#view=lm&corpus=shakespeare" (view names the view, no setting)
// over defaults, with readers (setting name: oneOf, wholeNumber or the like); every other key and
// every value that will not do keeps the default and is pushed to corrections as
// {key, value, allowed, using} (allowed null: no such setting).
export function settingsFromHash(hash, defaults, readers, corrections) {
  const settings = { ...defaults };
  for (const [key, value] of new URLSearchParams(hash.replace(/^#/, ''))) {
    const reader = Object.hasOwn(readers, key) ? readers[key] : null;
    const read = reader?.read(value);
    if (read !== undefined) settings[key] = read;
    else if (key !== 'view') corrections.push({ key, value, allowed: reader?.allowed ?? null, using: defaults[key] ?? 'the default' });
  }
  return settings;
}
