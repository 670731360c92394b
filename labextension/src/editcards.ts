/**
 * The edit cards of one notebook view, by request id: showing an `edit` (asked, applied
 * at once, or stale from the start), the same edit sent again after a `hello` (one card,
 * answered on the newest comm), `cancel` and `settled`, and keeping each card in the
 * widget of its cell as the notebook re-renders. A cell shows its waiting cards and its
 * newest decided one.
 */

import type { Cell, ICellModel } from '@jupyterlab/cells';
import type { NotebookPanel } from '@jupyterlab/notebook';
import type { PanelLayout } from '@lumino/widgets';

import { findCell, indexOf, setSource } from './cells';
import { EditCard, type Answer } from './editcard';
import type { Decision, IEditRequest } from './protocol';

/**
 * Put WIDGET into CELL's widget right after its input (before a code cell's outputs),
 * unless it is there already. A cell still drawn as a placeholder gets it once rendered.
 */
export function placeAfterInput(cell: Cell, widget: EditCard): void {
  if (widget.parent === cell || cell.isDisposed) {
    return;
  }
  const input = cell.inputArea?.parent;
  if (!input) {
    void cell.ready.then(() => placeAfterInput(cell, widget));
    return;
  }
  const layout = cell.layout as PanelLayout;
  layout.insertWidget(layout.widgets.indexOf(input) + 1, widget);
}

export class EditCards {
  constructor(private readonly panel: NotebookPanel) {
    panel.content.model?.cells.changed.connect(this._onCellsChanged, this);
  }

  /**
   * Show the edit REQUEST, answering through ANSWER. Sent again (the kernel repeats a
   * waiting edit to a page that says hello), it keeps its one card and answers on the
   * newest comm; an edit this page already decided gets that decision again.
   */
  show(request: IEditRequest, answer: Answer): void {
    const known = this._cards.get(request.id);
    if (known) {
      known.answer = answer;
      if (known.state === 'waiting') {
        this.place(known);
      } else if (known.decision) {
        answer(known.decision, known.reason);
      }
      return;
    }
    const cell = findCell(this.panel, request.cell, request.index);
    // a cell shows its newest decided card only (the notebook's undo reaches further back)
    for (const older of this._cards.values()) {
      if (older.cell === cell && older.state !== 'waiting') {
        older.dispose();
      }
    }
    const card = new EditCard(request, cell, answer);
    this._cards.set(request.id, card);
    if (cell.sharedModel.getSource() !== request.old_source) {
      card.decide('stale', '');
    } else if (!request.ask) {
      setSource(cell, request.new_source);
      card.decide('accepted', '');
    } else {
      card.showWaiting();
    }
    this.place(card);
  }

  /** The kernel no longer waits for edit OF (its run ended or was interrupted). */
  cancel(of: number): void {
    const card = this._cards.get(of);
    if (card?.state === 'waiting') {
      card.fold('cancelled');
    }
  }

  /** Another page decided edit OF. */
  settle(of: number, decision: Decision): void {
    const card = this._cards.get(of);
    if (card?.state === 'waiting') {
      card.fold('settled', decision);
    }
  }

  /** The kernel that sent the edits is gone (restarted, changed): none can be answered. */
  forget(): void {
    for (const card of this._cards.values()) {
      if (card.state === 'waiting') {
        card.fold('gone');
      }
    }
    this._cards.clear();
  }

  /** Put CARD into the widget that shows its cell now. */
  place(card: EditCard): void {
    if (card.isDisposed) {
      return;
    }
    const widget = this.panel.content.widgets.find(w => w.model === card.cell);
    if (widget) {
      placeAfterInput(widget, card);
    }
  }

  dispose(): void {
    this.panel.content.model?.cells.changed.disconnect(this._onCellsChanged, this);
    for (const card of this._cards.values()) {
      card.dispose();
    }
    this._cards.clear();
  }

  /**
   * After the cells changed: a waiting edit whose cell was deleted is stale (the agent
   * must read the notebook again); every card goes back into its cell's widget.
   */
  private _onCellsChanged(): void {
    // the notebook makes the widgets of new cells in its own handler of this signal (a
    // microtask, not a frame: a hidden tab gets no frames)
    queueMicrotask(() => {
      for (const card of this._cards.values()) {
        const cell: ICellModel = card.cell;
        if (indexOf(this.panel, cell) < 0) {
          if (card.state === 'waiting') {
            card.decide('stale', '');
          }
          continue;
        }
        this.place(card);
      }
    });
  }

  private readonly _cards = new Map<number, EditCard>();
}
