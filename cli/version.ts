// Replaced at bundle time by esbuild's define; from source it is the package version.
declare const __DRAINGUARD_VERSION__: string | undefined;
export const VERSION: string =
  typeof __DRAINGUARD_VERSION__ === 'string' ? __DRAINGUARD_VERSION__ : '0.1.0-dev';
