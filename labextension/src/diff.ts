/**
 * A line diff of a cell's old and new source, as a person reads one: removed lines, added
 * lines, and only a few unchanged lines around each change (longer unchanged runs fold
 * into one "N unchanged lines" row).
 *
 * The common head and tail are cut first (an edit of a cell usually touches a few lines);
 * the rest is a longest-common-subsequence table, which is quadratic, so past
 * `MAX_TABLE` cells the middle is shown as all removed, then all added: still exact, only
 * less tidy.
 */

export type DiffRow =
  | { kind: 'same' | 'del' | 'add'; text: string }
  | { kind: 'skip'; count: number };

/** Unchanged lines shown on each side of a change. */
export const CONTEXT = 2;

const MAX_TABLE = 4_000_000;

function lines(source: string): string[] {
  return source === '' ? [] : source.split('\n');
}

function middle(a: string[], b: string[]): DiffRow[] {
  const n = a.length;
  const m = b.length;
  if (n * m > MAX_TABLE) {
    return [...a.map(text => ({ kind: 'del' as const, text })), ...b.map(text => ({ kind: 'add' as const, text }))];
  }
  // common[i][j]: the longest common subsequence of a[i:] and b[j:], in one flat array
  const width = m + 1;
  const common = new Uint32Array((n + 1) * width);
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      common[i * width + j] =
        a[i] === b[j]
          ? common[(i + 1) * width + j + 1] + 1
          : Math.max(common[(i + 1) * width + j], common[i * width + j + 1]);
    }
  }
  const rows: DiffRow[] = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) {
      rows.push({ kind: 'same', text: a[i] });
      i++;
      j++;
    } else if (common[(i + 1) * width + j] >= common[i * width + j + 1]) {
      rows.push({ kind: 'del', text: a[i++] });
    } else {
      rows.push({ kind: 'add', text: b[j++] });
    }
  }
  while (i < n) {
    rows.push({ kind: 'del', text: a[i++] });
  }
  while (j < m) {
    rows.push({ kind: 'add', text: b[j++] });
  }
  return rows;
}

/**
 * How many items A and B share at their start and (after that) at their end: of lines
 * here, of characters where a source is changed in place.
 */
export function commonEnds<T>(a: ArrayLike<T>, b: ArrayLike<T>): { head: number; tail: number } {
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) {
    head++;
  }
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) {
    tail++;
  }
  return { head, tail };
}

/** Every line of OLD and NEW as same, removed or added, in order. */
export function lineDiff(oldSource: string, newSource: string): DiffRow[] {
  const a = lines(oldSource);
  const b = lines(newSource);
  const { head, tail } = commonEnds(a, b);
  const same = (text: string): DiffRow => ({ kind: 'same', text });
  return [
    ...a.slice(0, head).map(same),
    ...middle(a.slice(head, a.length - tail), b.slice(head, b.length - tail)),
    ...a.slice(a.length - tail).map(same)
  ];
}

/** ROWS with each run of unchanged lines farther than CONTEXT from a change folded. */
export function folded(rows: DiffRow[], context = CONTEXT): DiffRow[] {
  const near = rows.map(() => false);
  rows.forEach((row, n) => {
    if (row.kind !== 'same') {
      for (let k = Math.max(0, n - context); k <= Math.min(rows.length - 1, n + context); k++) {
        near[k] = true;
      }
    }
  });
  const shown: DiffRow[] = [];
  let skipped = 0;
  rows.forEach((row, n) => {
    if (near[n]) {
      if (skipped) {
        shown.push({ kind: 'skip', count: skipped });
        skipped = 0;
      }
      shown.push(row);
    } else {
      skipped++;
    }
  });
  if (skipped) {
    shown.push({ kind: 'skip', count: skipped });
  }
  return shown;
}
