// Kubernetes label selectors (metav1.LabelSelector), evaluated as the API machinery does.

export interface LabelSelectorRequirement {
  key: string;
  operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist' | string;
  values?: string[];
}

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: LabelSelectorRequirement[];
}

/**
 * Whether `labels` satisfy `selector`. An empty selector matches everything; an unknown
 * operator matches nothing (as metav1.LabelSelectorAsSelector refuses it).
 */
export function selectorMatches(selector: LabelSelector, labels: Record<string, string> = {}): boolean {
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const r of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, r.key);
    const values = r.values ?? [];
    switch (r.operator) {
      case 'In':
        if (!has || !values.includes(labels[r.key] as string)) return false;
        break;
      case 'NotIn':
        if (has && values.includes(labels[r.key] as string)) return false;
        break;
      case 'Exists':
        if (!has) return false;
        break;
      case 'DoesNotExist':
        if (has) return false;
        break;
      default:
        return false;
    }
  }
  return true;
}
