/**
 * The page side of the notebook bridge's messages (docs/notebook-bridge.md): the target's
 * name, the shapes of requests and replies, and the checks a request passes before the
 * page acts on it. Requests come from the kernel, which reads model output: every field is
 * checked for its type and bounded in size, and a request that fails gets one error reply
 * naming the field.
 */

import type * as nbformat from '@jupyterlab/nbformat';

/** The comm target both sides name. */
export const TARGET = 'harness_nb.notebook';

/** The protocol version this page speaks. */
export const PROTOCOL = 1;

/** The most characters a cell source in a request may have (1 MiB of text). */
export const MAX_SOURCE = 1 << 20;

/** The most characters of an explanation or an agent's name a card shows. */
export const MAX_EXPLANATION = 20_000;
export const MAX_AGENT = 200;

/** The most outputs an `outputs` request may set on one cell. */
export const MAX_OUTPUTS = 1000;

export type Frontend = 'jupyterlab' | 'notebook';

export interface IHello {
  type: 'hello';
  protocol: number;
  frontend: Frontend;
  notebook: string;
}

export type Decision = 'accepted' | 'rejected' | 'accepted_and_run' | 'stale';

export interface IReadCell {
  id: string;
  index: number;
  kind: 'code' | 'markdown' | 'raw';
  source: string;
  execution_count: number | null;
  outputs: nbformat.IOutput[];
  running: boolean;
  agent: string | null;
}

export interface IEditRequest {
  type: 'edit';
  id: number;
  cell: string;
  index: number;
  old_source: string;
  new_source: string;
  explanation: string;
  agent: string;
  ask: boolean;
}

export interface IInsertRequest {
  type: 'insert';
  id: number;
  index: number;
  kind: 'code' | 'markdown';
  source: string;
  agent: string;
}

export interface IOutputsRequest {
  type: 'outputs';
  id: number;
  cell: string;
  index?: number;
  execution_count: number | null;
  outputs: nbformat.IOutput[];
}

export interface IReadRequest {
  type: 'read';
  id: number;
}

export interface ICancelRequest {
  type: 'cancel';
  id: number;
  of: number;
}

export interface ISettledRequest {
  type: 'settled';
  id: number;
  of: number;
  decision: Decision;
}

export type Request =
  | IReadRequest
  | IEditRequest
  | IInsertRequest
  | IOutputsRequest
  | ICancelRequest
  | ISettledRequest;

/** A request that failed its checks: the reply's one-line error. */
export class RequestError extends Error {}

const DECISIONS: ReadonlyArray<Decision> = ['accepted', 'rejected', 'accepted_and_run', 'stale'];

type Fields = Record<string, unknown>;

function integer(data: Fields, name: string, { nullable = false } = {}): number {
  const value = data[name];
  if (nullable && value === null) {
    return value as unknown as number;
  }
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new RequestError(`"${name}" must be a non-negative integer${nullable ? ' or null' : ''}`);
  }
  return value;
}

function text(data: Fields, name: string, limit: number): string {
  const value = data[name];
  if (typeof value !== 'string') {
    throw new RequestError(`"${name}" must be a string`);
  }
  if (value.length > limit) {
    throw new RequestError(`"${name}" has ${value.length} characters, more than the ${limit} a request may carry`);
  }
  return value;
}

function oneOf<T extends string>(data: Fields, name: string, allowed: ReadonlyArray<T>): T {
  const value = data[name];
  if (typeof value !== 'string' || !allowed.includes(value as T)) {
    throw new RequestError(`"${name}" must be one of ${allowed.map(a => `"${a}"`).join(', ')}`);
  }
  return value as T;
}

function outputs(data: Fields): nbformat.IOutput[] {
  const value = data.outputs;
  if (!Array.isArray(value) || value.length > MAX_OUTPUTS) {
    throw new RequestError(`"outputs" must be a list of at most ${MAX_OUTPUTS} nbformat outputs`);
  }
  for (const output of value) {
    const kind = (output as Fields | null)?.output_type;
    if (!['stream', 'display_data', 'execute_result', 'error'].includes(kind as string)) {
      throw new RequestError('each of "outputs" must be an nbformat output with an "output_type"');
    }
  }
  return value as nbformat.IOutput[];
}

/**
 * The request in a kernel message's data, checked; `null` for a message that is no
 * request (an unknown `type` from a newer kernel is an error, so it hears of it).
 * Throws `RequestError` for a request whose fields are wrong.
 */
export function parseRequest(data: Fields): Request {
  const type = data.type;
  // `cancel` and `settled` need no answer: a kernel may send them without an id
  const notice = (type === 'cancel' || type === 'settled') && data.id === undefined;
  const id = notice ? -1 : integer(data, 'id');
  switch (type) {
    case 'read':
      return { type, id };
    case 'edit':
      return {
        type,
        id,
        cell: text(data, 'cell', MAX_AGENT),
        index: integer(data, 'index'),
        old_source: text(data, 'old_source', MAX_SOURCE),
        new_source: text(data, 'new_source', MAX_SOURCE),
        explanation: text(data, 'explanation', MAX_EXPLANATION),
        agent: text(data, 'agent', MAX_AGENT),
        ask: data.ask !== false
      };
    case 'insert':
      return {
        type,
        id,
        index: integer(data, 'index'),
        kind: oneOf(data, 'kind', ['code', 'markdown'] as const),
        source: text(data, 'source', MAX_SOURCE),
        agent: text(data, 'agent', MAX_AGENT)
      };
    case 'outputs':
      return {
        type,
        id,
        cell: text(data, 'cell', MAX_AGENT),
        index: data.index === undefined ? undefined : integer(data, 'index'),
        execution_count: integer(data, 'execution_count', { nullable: true }),
        outputs: outputs(data)
      };
    case 'cancel':
      return { type, id, of: integer(data, 'of') };
    case 'settled':
      return { type, id, of: integer(data, 'of'), decision: oneOf(data, 'decision', DECISIONS) };
    default:
      throw new RequestError(`unknown request type ${JSON.stringify(type)}: this page speaks protocol ${PROTOCOL}`);
  }
}
