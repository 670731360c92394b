/**
 * How cells look, from their content: the body of a `%%agent`, `%%@name` or `%%team` cell
 * is prose, so its editor highlights Markdown (and follows the first line as it is
 * typed); a cell the agent inserted carries a badge naming the agent.
 *
 * The notebook sets every code cell's language from the kernel's (on load and whenever
 * the kernel changes), so the switch is kept, not made once: each change of a cell's
 * source or language puts the one this module wants back. The editor loads a language
 * before it applies it, and the last load to finish wins, not the last change: so the
 * Markdown goes back only once the language the notebook set has loaded.
 */

import type { Cell, ICellModel } from '@jupyterlab/cells';
import type { IEditorLanguageRegistry } from '@jupyterlab/codemirror';
import type { NotebookPanel } from '@jupyterlab/notebook';

import { agentOf } from './cells';

/** The language JupyterLab gives Markdown cells (GitHub Markdown with LaTeX). */
export const MARKDOWN_MIMETYPE = 'text/x-ipythongfm';

/** A cell whose first line starts one of harness_nb's prose cell magics. */
const PROSE_MAGIC = /^%%(?:agent|team|@[^\s]+)(?:\s|$)/;

/** Whether SOURCE is a cell the agent reads as prose (`%%agent`, `%%@name`, `%%team`). */
export function isProseCell(source: string): boolean {
  return PROSE_MAGIC.test(source);
}

export class CellDecorations {
  constructor(
    private readonly panel: NotebookPanel,
    private readonly languages: IEditorLanguageRegistry | null
  ) {
    const cells = panel.content.model?.cells;
    cells?.changed.connect(this._onCellsChanged, this);
    this._onCellsChanged();
  }

  dispose(): void {
    this.panel.content.model?.cells.changed.disconnect(this._onCellsChanged, this);
    for (const stop of [...this._watched.values()]) {
      stop();
    }
  }

  /** Watch the cells not watched yet, and mark every cell's widget. */
  private _onCellsChanged(): void {
    const cells = this.panel.content.model?.cells;
    if (!cells) {
      return;
    }
    const present = new Set<ICellModel>();
    for (let n = 0; n < cells.length; n++) {
      const cell = cells.get(n);
      present.add(cell);
      if (!this._watched.has(cell)) {
        this._watch(cell);
      }
    }
    for (const [cell, stop] of this._watched) {
      if (!present.has(cell)) {
        stop(); // a deleted cell (or one whose type changed: a new model replaced it)
      }
    }
    // the notebook makes the widgets of new cells in its own handler of this signal (a
    // microtask, not a frame: a hidden tab gets no frames)
    queueMicrotask(() => this.panel.content.widgets.forEach(widget => this._mark(widget)));
  }

  private _watch(cell: ICellModel): void {
    const language = () => this._keepLanguage(cell);
    const agent = () => {
      const widget = this.panel.content.widgets.find(w => w.model === cell);
      if (widget) {
        this._mark(widget);
      }
    };
    cell.sharedModel.changed.connect(language);
    cell.mimeTypeChanged.connect(language);
    cell.metadataChanged.connect(agent);
    const stop = () => {
      cell.sharedModel.changed.disconnect(language);
      cell.mimeTypeChanged.disconnect(language);
      cell.metadataChanged.disconnect(agent);
      this._watched.delete(cell);
    };
    this._watched.set(cell, stop);
    language();
  }

  /** Markdown for a prose cell; for a cell that stopped being one, the notebook's own. */
  private _keepLanguage(cell: ICellModel): void {
    if (cell.type !== 'code') {
      return;
    }
    if (isProseCell(cell.sharedModel.getSource())) {
      this._switched.add(cell);
      if (cell.mimeType !== MARKDOWN_MIMETYPE) {
        const loaded = this.languages?.getLanguage(cell.mimeType) ?? Promise.resolve();
        void loaded
          .catch(() => null)
          .then(() => setTimeout(() => this._toMarkdown(cell)));
      }
    } else if (this._switched.delete(cell) && cell.mimeType === MARKDOWN_MIMETYPE) {
      cell.mimeType = this.panel.content.codeMimetype;
    }
  }

  private _toMarkdown(cell: ICellModel): void {
    if (!cell.isDisposed && this._switched.has(cell) && cell.mimeType !== MARKDOWN_MIMETYPE) {
      cell.mimeType = MARKDOWN_MIMETYPE;
    }
  }

  /** The badge of an agent's cell (and none on any other). */
  private _mark(widget: Cell): void {
    const agent = agentOf(widget.model);
    let badge = widget.node.querySelector(':scope > .hnb-agent-badge');
    widget.toggleClass('hnb-agent-cell', agent !== null);
    if (agent === null) {
      badge?.remove();
      return;
    }
    if (!badge) {
      badge = document.createElement('div');
      badge.className = 'hnb-agent-badge';
      widget.node.appendChild(badge);
    }
    badge.textContent = `✦ ${agent}`;
    badge.setAttribute('title', `Inserted by the agent ${agent}`);
  }

  private readonly _watched = new Map<ICellModel, () => void>();
  private readonly _switched = new WeakSet<ICellModel>();
}
