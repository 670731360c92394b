/**
 * One notebook view's end of the bridge (docs/notebook-bridge.md): it registers the
 * target on the view's kernel connection, says `hello` on the comm the kernel opens and
 * on one it opens itself, answers the requests addressed to this page (`page` is the
 * connection's `clientId`, the `session` of every message it sends), and follows the
 * kernel through restarts and changes.
 *
 * A view can hold two comms at once: the one the kernel opened when harness_nb loaded
 * (it reaches every page) and the one this page opened (when the kernel had loaded
 * harness_nb before this page connected). A reply goes back on the comm its request came
 * on; this page never closes the kernel's comm, which the other pages share.
 */

import type { NotebookPanel } from '@jupyterlab/notebook';
import type { Kernel, KernelMessage } from '@jupyterlab/services';
import type { JSONObject } from '@lumino/coreutils';

import { findCell, insertCell, readCells, setOutputs } from './cells';
import { EditCards } from './editcards';
import { PROTOCOL, RequestError, TARGET, parseRequest, type Frontend, type IHello, type Request } from './protocol';

type Comm = Kernel.IComm;

export class PageBridge {
  constructor(
    private readonly panel: NotebookPanel,
    private readonly frontend: Frontend
  ) {
    this._cards = new EditCards(panel);
    const session = panel.sessionContext;
    session.kernelChanged.connect((_, change) => this._attach(change.newValue), this);
    this._attach(session.session?.kernel ?? null);
    this._onUnload = () => this._sayBye();
    window.addEventListener('pagehide', this._onUnload);
  }

  /** The page's id in the bridge: the `session` of the messages it sends. */
  get page(): string | null {
    return this._kernel?.clientId ?? null;
  }

  dispose(): void {
    window.removeEventListener('pagehide', this._onUnload);
    this._attach(null);
    this._cards.dispose();
  }

  private _attach(kernel: Kernel.IKernelConnection | null): void {
    const old = this._kernel;
    if (old === kernel) {
      return;
    }
    if (old && !old.isDisposed) {
      this._sayBye();
      old.removeCommTarget(TARGET, this._onKernelComm);
      old.statusChanged.disconnect(this._onStatus, this);
      this._own?.close(); // never the kernel's comm: other pages share it
    }
    this._own = null;
    this._comms.clear();
    this._cards.forget();
    this._kernel = kernel;
    if (!kernel || !kernel.handleComms) {
      return;
    }
    kernel.registerCommTarget(TARGET, this._onKernelComm);
    kernel.statusChanged.connect(this._onStatus, this);
    this._openOwnComm();
  }

  /** A restart empties the kernel: its comms and waiting edits are gone. */
  private _onStatus(kernel: Kernel.IKernelConnection, status: Kernel.Status): void {
    if (status === 'restarting' || status === 'autorestarting') {
      this._comms.clear();
      this._own = null;
      this._cards.forget();
      this._restarted = true;
    } else if (status === 'idle' && this._restarted) {
      this._restarted = false;
      this._openOwnComm(); // closed at once unless the kernel loads harness_nb on start
    }
  }

  /** The kernel opened the bridge's comm (harness_nb loaded): say hello on it. */
  private readonly _onKernelComm = (comm: Comm, _msg: KernelMessage.ICommOpenMsg): void => {
    this._listen(comm);
    comm.send(this._hello() as unknown as JSONObject);
  };

  /** Open a comm of this page's own, its hello as its data. */
  private _openOwnComm(): void {
    const kernel = this._kernel;
    if (!kernel || kernel.isDisposed) {
      return;
    }
    try {
      const comm = kernel.createComm(TARGET);
      this._listen(comm);
      this._own = comm;
      comm.open(this._hello() as unknown as JSONObject);
    } catch (error) {
      console.warn('harness-nb: could not open the bridge comm', error);
    }
  }

  private _listen(comm: Comm): void {
    this._comms.add(comm);
    comm.onMsg = msg => this._onMessage(comm, msg.content.data as Record<string, unknown>);
    comm.onClose = () => {
      this._comms.delete(comm);
      if (this._own === comm) {
        this._own = null;
      }
    };
  }

  private _hello(): IHello {
    return { type: 'hello', protocol: PROTOCOL, frontend: this.frontend, notebook: this.panel.context.path };
  }

  private _sayBye(): void {
    for (const comm of this._comms) {
      if (!comm.isDisposed) {
        comm.send({ type: 'bye' });
      }
    }
  }

  private _onMessage(comm: Comm, data: Record<string, unknown>): void {
    if (!data || data.page !== this.page) {
      return; // for another page (the kernel's comm reaches every page)
    }
    const id = data.id;
    const reply = (fields: Record<string, unknown>) => {
      if (Number.isSafeInteger(id) && !comm.isDisposed) {
        comm.send({ type: 'reply', id, ...fields } as JSONObject);
      }
    };
    let request: Request;
    try {
      request = parseRequest(data);
      this._handle(request, reply);
    } catch (error) {
      if (!(error instanceof RequestError)) {
        console.error('harness-nb: a bridge request failed', error);
      }
      reply({ error: error instanceof Error ? error.message : String(error) });
    }
  }

  private _handle(request: Request, reply: (fields: Record<string, unknown>) => void): void {
    switch (request.type) {
      case 'read':
        reply({ notebook: this.panel.context.path, cells: readCells(this.panel) });
        break;
      case 'edit':
        this._cards.show(request, (decision, reason) => reply({ decision, reason }));
        break;
      case 'insert': {
        const cell = insertCell(this.panel, request.index, request.kind, request.source, request.agent);
        reply({ cell: cell.id, index: request.index });
        break;
      }
      case 'outputs':
        setOutputs(findCell(this.panel, request.cell, request.index), request.execution_count, request.outputs);
        reply({});
        break;
      case 'cancel':
        this._cards.cancel(request.of);
        reply({});
        break;
      case 'settled':
        this._cards.settle(request.of, request.decision);
        reply({});
        break;
    }
  }

  private _kernel: Kernel.IKernelConnection | null = null;
  private readonly _comms = new Set<Comm>();
  private _own: Comm | null = null;
  private _restarted = false;
  private readonly _cards: EditCards;
  private readonly _onUnload: () => void;
}
