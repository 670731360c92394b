/**
 * The edit card: the agent's proposed change of one cell, shown inside that cell, between
 * its input and its outputs. Waiting, it shows the explanation, a line diff and Accept,
 * Accept and run (a code cell's), Reject (with a box for the reason). Decided, it folds to one line; an
 * accepted edit keeps an Undo there while the cell still holds the new source.
 *
 * Nothing changes before a click: Accept (and Accept and run) first checks that the cell
 * still holds the source the agent read, and answers `stale` when it does not. The card
 * keeps its cell's model, not its widget: a cell's widget can be made anew (its type
 * changed, the notebook re-rendered), and `EditCards.place` puts the card back into
 * whichever widget shows the cell now.
 */

import type { ICellModel } from '@jupyterlab/cells';
import { Widget } from '@lumino/widgets';

import { setSource } from './cells';
import { folded, lineDiff } from './diff';
import type { Decision, IEditRequest } from './protocol';

/** The most characters of a reject's reason sent to the kernel. */
export const MAX_REASON = 2000;

export type CardState =
  | 'waiting'
  | Decision
  | 'undone'
  | 'cancelled'
  | 'settled'
  | 'gone';

/** What the card answers the kernel: a decision and the person's reason. */
export type Answer = (decision: Decision, reason: string) => void;

function element<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  node.className = className;
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

function button(label: string, className: string, onClick: () => void): HTMLButtonElement {
  const node = element('button', `hnb-edit-button ${className}`, label);
  node.type = 'button';
  node.addEventListener('click', event => {
    event.stopPropagation();
    onClick();
  });
  return node;
}

/** The diff of OLD → NEW as rows of a `<div>`: a sign column and the line. */
export function diffView(oldSource: string, newSource: string): HTMLElement {
  const view = element('div', 'hnb-diff');
  view.setAttribute('role', 'table');
  view.setAttribute('aria-label', 'Changes to the cell');
  const rows = folded(lineDiff(oldSource, newSource));
  if (rows.length === 1 && rows[0].kind === 'skip') {
    view.appendChild(element('div', 'hnb-diff-row hnb-diff-skip', 'No change to the source.'));
    return view;
  }
  for (const row of rows) {
    if (row.kind === 'skip') {
      const noun = row.count === 1 ? 'line' : 'lines';
      view.appendChild(element('div', 'hnb-diff-row hnb-diff-skip', `⋯ ${row.count} unchanged ${noun}`));
      continue;
    }
    const line = element('div', `hnb-diff-row hnb-diff-${row.kind}`);
    line.setAttribute('role', 'row');
    const sign = element('span', 'hnb-diff-sign', row.kind === 'del' ? '−' : row.kind === 'add' ? '+' : ' ');
    sign.setAttribute('aria-label', row.kind === 'del' ? 'removed' : row.kind === 'add' ? 'added' : 'unchanged');
    line.append(sign, element('span', 'hnb-diff-text', row.text === '' ? '\u200b' : row.text));
    view.appendChild(line);
  }
  return view;
}

export class EditCard extends Widget {
  constructor(
    readonly request: IEditRequest,
    readonly cell: ICellModel,
    public answer: Answer
  ) {
    super();
    this.addClass('hnb-edit');
    this.node.dataset.hnbEdit = String(request.id);
    // typing in the reason box must not run the notebook's command-mode shortcuts
    this.node.setAttribute('data-lm-suppress-shortcuts', 'true');
    this._onSourceChanged = () => this._refreshUndo();
    cell.sharedModel.changed.connect(this._onSourceChanged);
  }

  get state(): CardState {
    return this._state;
  }

  /** The decision sent to the kernel, for a card decided on this page. */
  get decision(): Decision | null {
    return this._decision;
  }

  /** The person's reason, sent with a rejection. */
  get reason(): string {
    return this._reason;
  }

  /** Draw the card waiting for the person. */
  showWaiting(): void {
    this._setState('waiting');
    const node = this.node;
    node.replaceChildren();
    const head = element('div', 'hnb-edit-head');
    head.append(element('span', 'hnb-edit-mark', '✎'), ` ${this.request.agent || 'The agent'} proposes an edit of this cell`);
    node.appendChild(head);
    if (this.request.explanation.trim()) {
      node.appendChild(element('div', 'hnb-edit-why', this.request.explanation));
    }
    node.appendChild(diffView(this.request.old_source, this.request.new_source));
    const actions = element('div', 'hnb-edit-actions');
    const reason = element('input', 'hnb-edit-reason');
    reason.type = 'text';
    reason.maxLength = MAX_REASON;
    reason.placeholder = 'Reason (optional) — tells the agent why';
    reason.setAttribute('aria-label', 'Reason for rejecting the edit');
    reason.addEventListener('keydown', event => {
      event.stopPropagation(); // Enter, Escape and the rest stay in the box
      if (event.key === 'Enter') {
        this.reject(reason.value);
      }
    });
    actions.append(button('Accept', 'hnb-edit-accept', () => this.accept(false)));
    if (this.cell.type === 'code') {
      // a markdown cell has nothing to run
      actions.append(button('Accept and run', 'hnb-edit-run', () => this.accept(true)));
    }
    actions.append(button('Reject', 'hnb-edit-reject', () => this.reject(reason.value)), reason);
    node.appendChild(actions);
  }

  /** Accept: the new source goes in (if the cell still holds the old), the kernel hears. */
  accept(run: boolean): void {
    if (this._state !== 'waiting') {
      return;
    }
    if (this.cell.sharedModel.getSource() !== this.request.old_source) {
      this.decide('stale', '');
      return;
    }
    setSource(this.cell, this.request.new_source);
    this.decide(run ? 'accepted_and_run' : 'accepted', '');
  }

  reject(reason: string): void {
    if (this._state === 'waiting') {
      this.decide('rejected', reason.trim().slice(0, MAX_REASON));
    }
  }

  /** Record DECISION, tell the kernel, fold. */
  decide(decision: Decision, reason: string): void {
    this._decision = decision;
    this._reason = reason;
    this.answer(decision, reason);
    this.fold(decision);
  }

  /** Fold to one line for STATE (DETAIL: another page's decision). */
  fold(state: CardState, detail = ''): void {
    this._setState(state);
    const node = this.node;
    node.replaceChildren();
    const line = element('div', 'hnb-edit-folded');
    const who = this.request.agent || 'the agent';
    const words: Record<CardState, string> = {
      waiting: '',
      accepted: `✓ Edit by ${who} accepted`,
      accepted_and_run: `✓ Edit by ${who} accepted and sent to run`,
      rejected: `✗ Edit by ${who} rejected` + (this._reason ? `: ${this._reason}` : ''),
      stale: `✗ Edit by ${who} not applied: the cell changed since the agent read it`,
      undone: `↶ Edit by ${who} undone: the cell has its old source again`,
      cancelled: `■ Edit by ${who} withdrawn: the agent no longer waits for it`,
      settled: `✓ Edit by ${who} decided in another view: ${detail.replace(/_/g, ' ')}`,
      gone: `■ Edit by ${who} withdrawn: the kernel restarted or changed`
    };
    line.appendChild(element('span', 'hnb-edit-words', words[state]));
    if (state === 'accepted' || state === 'accepted_and_run') {
      this._undo = button('Undo', 'hnb-edit-undo', () => this.undo());
      this._undo.title = 'Put the old source back';
      line.appendChild(this._undo);
      this._refreshUndo();
    } else {
      this._undo = null;
    }
    node.appendChild(line);
  }

  /** Put the old source back, while the cell still holds the new one. */
  undo(): void {
    if (this._undo && this.cell.sharedModel.getSource() === this.request.new_source) {
      setSource(this.cell, this.request.old_source);
      this.fold('undone');
    }
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this.cell.sharedModel.changed.disconnect(this._onSourceChanged);
    super.dispose();
  }

  private _refreshUndo(): void {
    if (this._undo) {
      const holds = this.cell.sharedModel.getSource() === this.request.new_source;
      this._undo.disabled = !holds;
      this._undo.title = holds ? 'Put the old source back' : 'The cell changed since: undo with Ctrl/Cmd+Z in the cell';
    }
  }

  private _setState(state: CardState): void {
    this._state = state;
    this.node.dataset.state = state;
    this.toggleClass('hnb-edit-waiting', state === 'waiting');
  }

  private _state: CardState = 'waiting';
  private _decision: Decision | null = null;
  private _reason = '';
  private _undo: HTMLButtonElement | null = null;
  private readonly _onSourceChanged: () => void;
}
