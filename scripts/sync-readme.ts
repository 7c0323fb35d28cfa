// Rewrites the README's generated configuration reference from the contract.
import { readFileSync, writeFileSync } from 'node:fs';
import { configReference } from './config-reference.ts';

const path = new URL('../README.md', import.meta.url);
const readme = readFileSync(path, 'utf8');
const next = readme.replace(
  /(<!-- config-reference:start -->\n)[\s\S]*?(\n<!-- config-reference:end -->)/,
  (_m, a: string, b: string) => `${a}${configReference()}${b}`,
);
writeFileSync(path, next);
