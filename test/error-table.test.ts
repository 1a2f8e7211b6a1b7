/**
 * The one error table (task/errors.ts ERRORS) and its renderings (issue 44, part 2): every row answers with its own
 * code, HTTP status, gRPC status and reason in each binding and dialect, the errors a handler raises carry their
 * row's code, and no other source file writes an error code. Starts nothing.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { status as GrpcStatus, Metadata } from '@grpc/grpc-js';
import { toJsonRpcError } from '@a2a-js/sdk/errors';
import { ERRORS, type ErrorName } from '../task/errors';
import { errorNameOf, grpcRefusal, jsonRpcErrorOf, restRefusal } from '../src/api/a2a/error-forms';
import { A2A_ERRORS, type A2AErrorName, a2aError } from '../src/api/a2a/errors';
import { legacyError, v1Error } from '../src/api/a2a/rpc-errors';

const NAMES = Object.keys(ERRORS) as ErrorName[];

test('every code names one error', () => {
  const codes = NAMES.map((n) => ERRORS[n].code);
  assert.equal(new Set(codes).size, codes.length);
  for (const name of NAMES) assert.equal(errorNameOf(ERRORS[name].code), name);
});

test('every row renders as itself in JSON-RPC (both dialects), HTTP+JSON and gRPC', () => {
  for (const name of NAMES) {
    const row = ERRORS[name];
    const refusal = { name, message: `a ${name}`, metadata: { why: 'test' } };
    const v1 = jsonRpcErrorOf(refusal, '1.0');
    assert.equal(v1.code, row.code, name);
    assert.deepEqual(v1.data, [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: row.reason, domain: row.domain, metadata: { why: 'test' } }], name);
    assert.equal(jsonRpcErrorOf(refusal, '0.3').code, row.code, name);
    const rest = restRefusal(refusal);
    assert.equal(rest.status, row.http, name);
    assert.deepEqual((rest.body.error as { code: number; status: string }).code, row.http, name);
    assert.equal((rest.body.error as { status: string }).status, row.grpc, name);
    const grpc = grpcRefusal(refusal);
    assert.equal(grpc.code, GrpcStatus[row.grpc], name);
    assert.ok(grpc.metadata instanceof Metadata);
    assert.ok(String(grpc.metadata.get('grpc-status-details-bin')[0]).includes(row.reason), name);
  }
});

test('every error a handler raises carries its row’s code in both dialects', () => {
  for (const name of Object.keys(A2A_ERRORS) as A2AErrorName[]) {
    const code = ERRORS[name].code;
    assert.equal(A2A_ERRORS[name].code, code, name);
    const raised = a2aError(name, `a ${name}`);
    assert.equal(toJsonRpcError(raised).code, code, `${name} (SDK)`);
    assert.equal(v1Error(raised).code, code, `${name} (1.0)`);
    assert.equal(legacyError(raised).code, code, `${name} (0.3)`);
    assert.equal(v1Error(raised).message, `a ${name}`, name);
  }
});

/** Source files of the project (tests, fixtures and generated code aside). */
function sources(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (name === 'node_modules' || name === 'generated') continue;
    if (statSync(path).isDirectory()) sources(path, out);
    else if (/\.ts$/.test(name) && !name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

test('no source file but task/errors.ts writes an A2A or JSON-RPC error code (-32768…-32000) as a number', () => {
  const root = resolve(__dirname, '..');
  const written: string[] = [];
  for (const dir of ['src', 'task', 'workflows', 'activities']) {
    for (const file of sources(join(root, dir))) {
      const rel = relative(root, file);
      if (rel === join('task', 'errors.ts')) continue;
      const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest);
      const visit = (node: ts.Node): void => {
        if (ts.isPrefixUnaryExpression(node) && node.operator === ts.SyntaxKind.MinusToken && ts.isNumericLiteral(node.operand)) {
          const n = Number(node.operand.text);
          if (n >= 32000 && n <= 32768) written.push(`${rel}: -${n}`);
        }
        ts.forEachChild(node, visit);
      };
      visit(source);
    }
  }
  assert.deepEqual(written, []);
});
