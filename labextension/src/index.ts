/**
 * harness-nb: harness_nb's extension for JupyterLab 4 and Notebook 7.
 *
 * Each open notebook gets its end of the bridge (`PageBridge`: the comm to the kernel,
 * read, edit cards, insert, outputs) and its cell decorations (Markdown highlighting of
 * the agent's prose cells, the badge of the agent's cells). A console on the same kernel
 * holds the bridge's comm quietly: a connection without the target would close the
 * kernel's comm for every page.
 */

import type { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { IEditorLanguageRegistry } from '@jupyterlab/codemirror';
import { IConsoleTracker } from '@jupyterlab/console';
import { INotebookTracker, type NotebookPanel } from '@jupyterlab/notebook';
import type { Kernel } from '@jupyterlab/services';

import { PageBridge } from './bridge';
import { CellDecorations } from './decorations';
import { TARGET, type Frontend } from './protocol';

/** Which frontend this page is: Notebook 7 names its application "Jupyter Notebook". */
function frontendOf(app: JupyterFrontEnd): Frontend {
  return /notebook/i.test(app.name) ? 'notebook' : 'jupyterlab';
}

function quietTarget(kernel: Kernel.IKernelConnection | null): void {
  if (kernel?.handleComms) {
    kernel.registerCommTarget(TARGET, () => undefined);
  }
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'harness-nb:bridge',
  description: "harness_nb's agent reads the notebook's cells, edits them through a diff you accept, and inserts cells.",
  autoStart: true,
  requires: [INotebookTracker],
  optional: [IConsoleTracker, IEditorLanguageRegistry],
  activate: (
    app: JupyterFrontEnd,
    notebooks: INotebookTracker,
    consoles: IConsoleTracker | null,
    languages: IEditorLanguageRegistry | null
  ) => {
    const frontend = frontendOf(app);
    notebooks.widgetAdded.connect((_, panel: NotebookPanel) => {
      void panel.context.ready.then(() => {
        if (panel.isDisposed) {
          return;
        }
        const bridge = new PageBridge(panel, frontend);
        const decorations = new CellDecorations(panel, languages);
        panel.disposed.connect(() => {
          bridge.dispose();
          decorations.dispose();
        });
      });
    });
    consoles?.widgetAdded.connect((_, panel) => {
      quietTarget(panel.sessionContext.session?.kernel ?? null);
      panel.sessionContext.kernelChanged.connect((__, change) => quietTarget(change.newValue));
    });
  }
};

export default plugin;
