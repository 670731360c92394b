/**
 * What the bridge does to a notebook's cells: read them all, find one by its id (its
 * position as a fallback and a check), insert the agent's cell, put outputs into a cell,
 * and change a source so the notebook's own undo takes it back.
 *
 * Everything goes through the shared model (`sharedModel`), as the person's own typing
 * does: the change reaches every view of the document, and a cell's undo manager (what
 * Ctrl/Cmd+Z in the cell calls) records it.
 */

import type { ICellModel, ICodeCellModel } from '@jupyterlab/cells';
import type * as nbformat from '@jupyterlab/nbformat';
import type { NotebookPanel } from '@jupyterlab/notebook';

import { commonEnds } from './diff';
import { RequestError, type IReadCell } from './protocol';

/** The metadata key of harness_nb's own cell metadata (`{"agent": name}`). */
export const METADATA_KEY = 'harness_nb';

/** The agent that inserted CELL, from its metadata, or null. */
export function agentOf(cell: ICellModel): string | null {
  const mine = cell.getMetadata(METADATA_KEY) as { agent?: unknown } | undefined;
  return typeof mine?.agent === 'string' ? mine.agent : null;
}

function models(panel: NotebookPanel): ICellModel[] {
  const cells = panel.content.model?.cells;
  return cells ? Array.from({ length: cells.length }, (_, n) => cells.get(n)) : [];
}

/** Every cell in order, as the `read` reply names them. */
export function readCells(panel: NotebookPanel): IReadCell[] {
  return models(panel).map((cell, index) => {
    const code = cell.type === 'code' ? (cell as ICodeCellModel) : null;
    return {
      id: cell.id,
      index,
      kind: cell.type as IReadCell['kind'],
      source: cell.sharedModel.getSource(),
      execution_count: code?.executionCount ?? null,
      outputs: code ? (code.outputs.toJSON() as nbformat.IOutput[]) : [],
      running: code?.executionState === 'running',
      agent: agentOf(cell)
    };
  });
}

/**
 * The cell named ID, else the cell at INDEX (where the kernel last saw it): a notebook of
 * nbformat < 4.5 gets new cell ids each time it loads, so an id can be gone while the
 * position still holds; an edit then still checks the cell's source before it changes it.
 */
export function findCell(panel: NotebookPanel, id: string, index?: number): ICellModel {
  const cells = models(panel);
  const found = cells.find(cell => cell.id === id) ?? (index !== undefined ? cells[index] : undefined);
  if (!found) {
    throw new RequestError(`no cell has the id "${id}" and the notebook has ${cells.length} cells: read it again`);
  }
  return found;
}

/** The position of CELL in its notebook now, or -1 once it is gone. */
export function indexOf(panel: NotebookPanel, cell: ICellModel): number {
  return models(panel).indexOf(cell);
}

/**
 * Set CELL's source to VALUE as one change of the shared model: only the part between
 * the common head and tail is replaced, so the cursor and the rest of the text stay put
 * and one Ctrl/Cmd+Z restores the old text (and that text only).
 */
export function setSource(cell: ICellModel, value: string): void {
  const old = cell.sharedModel.getSource();
  if (old === value) {
    return;
  }
  const { head, tail } = commonEnds(old, value);
  // one undo step of its own: Yjs merges changes less than half a second apart, and the
  // person's typing (or another edit) just before must not be undone with this one
  const undo = (cell.sharedModel as { undoManager?: { stopCapturing(): void } | null }).undoManager;
  undo?.stopCapturing();
  cell.sharedModel.updateSource(head, old.length - tail, value.slice(head, value.length - tail));
  undo?.stopCapturing();
}

/** Insert the agent's cell at INDEX (0…number of cells) and return it. */
export function insertCell(
  panel: NotebookPanel,
  index: number,
  kind: 'code' | 'markdown',
  source: string,
  agent: string
): ICellModel {
  const model = panel.content.model;
  if (!model) {
    throw new RequestError('the notebook is not loaded yet');
  }
  const count = model.cells.length;
  if (index > count) {
    throw new RequestError(`"index" is ${index} but the notebook has ${count} cells (${count} inserts at the end)`);
  }
  model.sharedModel.insertCell(index, { cell_type: kind, source, metadata: { [METADATA_KEY]: { agent } } });
  return model.cells.get(index);
}

/** Put OUTPUTS and EXECUTION_COUNT into the code cell CELL (what the kernel ran for it). */
export function setOutputs(cell: ICellModel, executionCount: number | null, outputs: nbformat.IOutput[]): void {
  if (cell.type !== 'code') {
    throw new RequestError(`cell "${cell.id}" is a ${cell.type} cell: only a code cell has outputs`);
  }
  const code = cell as ICodeCellModel;
  code.outputs.clear();
  for (const output of outputs) {
    code.outputs.add(output);
  }
  code.executionCount = executionCount;
}
