// The interface names drainguard accepts, one rule for both roles: the webhook denies any other
// name in `drainguard.io/l2-interfaces` at admission, and the L2 fence splices only these into its
// nft script (a device name in quotes, a chain name `egress-<name>`). Narrower than Linux's
// dev_valid_name(), which also allows `x"y` or `a;b`: a pod author learns it at admission, not
// from a refused fence during a drain.

/** What INTERFACE_NAME accepts, for messages. */
export const INTERFACE_NAME_RULE = '1 to 15 characters: letters, digits, _ . -, starting with a letter';

const INTERFACE_NAME = /^[A-Za-z][A-Za-z0-9_.-]{0,14}$/;

/** Whether `name` is an interface name the fence accepts (INTERFACE_NAME_RULE). */
export const isInterfaceName = (name: string): boolean => INTERFACE_NAME.test(name);

/** The names in `names` the fence does not accept (INTERFACE_NAME_RULE). */
export const badInterfaceNames = (names: readonly string[]): string[] =>
  names.filter((n) => !isInterfaceName(n));
