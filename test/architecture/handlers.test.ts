// Issue 48: a route's handler over ~35 lines is a named function, so that the registrations read as
// the endpoint map and a long handler says what it does by its name. Read with the TypeScript
// parser (no type checking): every call of a route method (app.get(…), scope.post(…), …) whose
// handler is an arrow or an anonymous function expression is measured.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const SRC = path.resolve(import.meta.dirname, '../../src');
const ROUTE_METHODS = new Set(['get', 'post', 'put', 'patch', 'delete', 'head', 'options', 'all']);
const MAX_ANONYMOUS_LINES = 35;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

/** A route registration's handler: the last argument of `x.get('/path', …)` (the path a string literal), or `handler` of `x.route({ … })`. */
function handlerOf(call: ts.CallExpression): ts.Expression | undefined {
  if (!ts.isPropertyAccessExpression(call.expression)) return undefined;
  const method = call.expression.name.text;
  const [first] = call.arguments;
  if (ROUTE_METHODS.has(method) && first && (ts.isStringLiteralLike(first) || ts.isIdentifier(first) || ts.isTemplateExpression(first)) && call.arguments.length >= 2) {
    return call.arguments[call.arguments.length - 1];
  }
  if (method === 'route' && first && ts.isObjectLiteralExpression(first)) {
    const handler = first.properties.find((p) => ts.isPropertyAssignment(p) && p.name.getText() === 'handler');
    return handler && ts.isPropertyAssignment(handler) ? handler.initializer : undefined;
  }
  return undefined;
}

/** `file:line (n lines)` for each anonymous handler longer than the limit. */
function longAnonymousHandlers(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isCallExpression(node)) {
      const handler = handlerOf(node);
      const anonymous = handler && (ts.isArrowFunction(handler) || (ts.isFunctionExpression(handler) && !handler.name));
      if (anonymous) {
        const start = source.getLineAndCharacterOfPosition(handler.getStart(source)).line;
        const lines = source.getLineAndCharacterOfPosition(handler.getEnd()).line - start + 1;
        if (lines > MAX_ANONYMOUS_LINES) found.push(`${path.relative(SRC, file)}:${start + 1} (${lines} lines)`);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

describe('route handlers', () => {
  it(`over ${MAX_ANONYMOUS_LINES} lines are named functions`, () => {
    expect(sourceFiles(SRC).flatMap(longAnonymousHandlers)).toEqual([]);
  });
});
