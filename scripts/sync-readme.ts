// Rewrites the README's generated tables: the configuration reference from the contract, the Helm
// values from the chart's schema.
import { readFileSync, writeFileSync } from 'node:fs';
import { configReference } from './config-reference.ts';
import { helmValuesTable } from './helm-values.ts';

const path = new URL('../README.md', import.meta.url);
const readme = readFileSync(path, 'utf8');
const next = readme
  .replace(
    /(<!-- config-reference:start -->\n)[\s\S]*?(\n<!-- config-reference:end -->)/,
    (_m, a: string, b: string) => `${a}${configReference()}${b}`,
  )
  .replace(
    /(<!-- helm-values:start -->\n)[\s\S]*?(\n<!-- helm-values:end -->)/,
    (_m, a: string, b: string) => `${a}${helmValuesTable()}${b}`,
  );
writeFileSync(path, next);
