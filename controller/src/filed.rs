//! Objects filed under a key taken from them (controller-runtime's field index), kept from the
//! watch events that feed a cache, so that a reconcile or an admission request reads the
//! objects of its key and never scans the whole cache.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, RwLock};

use kube::ResourceExt;
use kube::runtime::watcher;
use tokio::sync::watch;

/// A pair of names: an object's (namespace, name), or the key it is filed under.
pub type Key = (String, String);

/// An object's namespace and name in one shared allocation (`{namespace}\0{name}`, which sorts
/// as the pair does: no name holds a NUL). Thousands are kept, each in two maps: one string
/// shared by both, not two pairs of strings apiece.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Named(Arc<str>);

impl Named {
    fn new(namespace: &str, name: &str) -> Named {
        Named(format!("{namespace}\0{name}").into())
    }

    fn of<K: kube::Resource>(object: &K) -> Named {
        Named::new(&object.namespace().unwrap_or_default(), &object.name_any())
    }

    /// (namespace, name).
    fn pair(&self) -> Key {
        let (namespace, name) = self.0.split_once('\0').unwrap_or(("", &self.0));
        (namespace.to_string(), name.to_string())
    }
}

struct Inner<V> {
    /// Objects by the key they are filed under (each key held once, shared): the value kept
    /// of each.
    by_key: HashMap<Arc<Key>, BTreeMap<Named, V>>,
    /// The key each object is filed under.
    key_of: HashMap<Named, Arc<Key>>,
    /// Entries of a relist, swapped in when it is complete.
    relist: Option<Vec<(Named, Key, V)>>,
}

impl<V> Default for Inner<V> {
    fn default() -> Self {
        Inner { by_key: HashMap::new(), key_of: HashMap::new(), relist: None }
    }
}

/// The shared copy of `key` among those `by_key` holds, or a new one.
fn shared_key<T>(by_key: &HashMap<Arc<Key>, T>, key: Key) -> Arc<Key> {
    by_key.get_key_value(&key).map_or_else(|| Arc::new(key), |(k, _)| k.clone())
}

impl<V> Inner<V> {
    fn remove(&mut self, object: &Named) {
        if let Some(key) = self.key_of.remove(object)
            && let Some(entries) = self.by_key.get_mut(&key)
        {
            entries.remove(object);
            if entries.is_empty() {
                self.by_key.remove(&key);
            }
        }
    }

    fn insert(&mut self, object: Named, key: Option<Key>, value: V) {
        self.remove(&object);
        if let Some(key) = key {
            let key = shared_key(&self.by_key, key);
            self.by_key.entry(key.clone()).or_default().insert(object.clone(), value);
            self.key_of.insert(object, key);
        }
    }
}

/// Objects of kind `K` filed by `key` (none when it gives `None`), each with a value taken
/// from it (`()` where the objects live in a store, the part needed where only that is kept).
pub struct Filed<K, V> {
    key: fn(&K) -> Option<Key>,
    extract: fn(&K) -> V,
    inner: RwLock<Inner<V>>,
    ready: watch::Sender<bool>,
}

impl<K: kube::Resource, V: Clone> Filed<K, V> {
    pub fn new(key: fn(&K) -> Option<Key>, extract: fn(&K) -> V) -> Filed<K, V> {
        Filed { key, extract, inner: RwLock::default(), ready: watch::Sender::new(false) }
    }

    /// Files one watch event.
    pub fn apply(&self, event: &watcher::Event<K>) {
        let mut inner = self.inner.write().expect("not poisoned");
        match event {
            watcher::Event::Apply(o) => inner.insert(Named::of(o), (self.key)(o), (self.extract)(o)),
            watcher::Event::Delete(o) => inner.remove(&Named::of(o)),
            watcher::Event::Init => inner.relist = Some(Vec::new()),
            watcher::Event::InitApply(o) => {
                if let Some(key) = (self.key)(o) {
                    let entry = (Named::of(o), key, (self.extract)(o));
                    inner.relist.get_or_insert_default().push(entry)
                }
            }
            watcher::Event::InitDone => {
                let listed = inner.relist.take().unwrap_or_default();
                inner.by_key.clear();
                inner.key_of.clear();
                for (object, key, value) in listed {
                    inner.insert(object, Some(key), value);
                }
                drop(inner);
                self.ready.send_replace(true);
            }
        }
    }

    /// The objects filed under `key`: (namespace, name) and value, in that order.
    pub fn get(&self, key: &Key) -> Vec<(Key, V)> {
        let inner = self.inner.read().expect("not poisoned");
        inner
            .by_key
            .get(key)
            .map(|m| m.iter().map(|(n, v)| (n.pair(), v.clone())).collect())
            .unwrap_or_default()
    }

    /// How many keys hold objects (for tests: an emptied key is gone).
    pub fn keys(&self) -> usize {
        self.inner.read().expect("not poisoned").by_key.len()
    }

    /// Waits until the first listing is filed.
    pub async fn wait_until_ready(&self) {
        let _ = self.ready.subscribe().wait_for(|r| *r).await;
    }
}

/// Set once a watch's first listing is complete. Any number of tasks may wait on it: a
/// store's own readiness wakes one waiter only, and the store's controller is that one.
#[derive(Clone, Default)]
pub struct Listed(Arc<watch::Sender<bool>>);

impl Listed {
    /// Notes a watch event: the end of the first listing makes it ready.
    pub fn see<K>(&self, event: &watcher::Event<K>) {
        if matches!(event, watcher::Event::InitDone) {
            self.0.send_replace(true);
        }
    }

    /// Waits until the first listing is complete.
    pub async fn wait(&self) {
        let _ = self.0.subscribe().wait_for(|listed| *listed).await;
    }
}

/// The objects of a store, filed under several keys at once (one index per key function):
/// each index holds the store's own objects (the `Arc` the store holds, taken once the watch
/// event reached it), so a reconcile reads the objects of its key without a lookup of each in
/// the store, and every object is held once. What an object was filed as is the object as
/// filed: its keys are taken from it again to take it out, so no copy of them is kept.
pub struct Indexed<K: kube::Resource<DynamicType = ()> + Clone + 'static> {
    store: kube::runtime::reflector::Store<K>,
    keys: Vec<fn(&K) -> Option<Key>>,
    inner: RwLock<IndexedInner<K>>,
    ready: watch::Sender<bool>,
}

/// An object's (namespace, name): the order an index gives its objects in, so that a caller
/// may look one up among them by binary search.
pub fn names<K: kube::Resource>(object: &K) -> (Option<&str>, Option<&str>) {
    let meta = object.meta();
    (meta.namespace.as_deref(), meta.name.as_deref())
}

/// An object of an index, ordered by its [`names`].
struct ByName<K>(Arc<K>);

impl<K: kube::Resource> ByName<K> {
    fn names(&self) -> (Option<&str>, Option<&str>) {
        names(self.0.as_ref())
    }
}

impl<K: kube::Resource> PartialEq for ByName<K> {
    fn eq(&self, other: &Self) -> bool {
        self.names() == other.names()
    }
}

impl<K: kube::Resource> Eq for ByName<K> {}

impl<K: kube::Resource> PartialOrd for ByName<K> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl<K: kube::Resource> Ord for ByName<K> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.names().cmp(&other.names())
    }
}

struct IndexedInner<K> {
    /// Per index: the objects by the key they are filed under (each key held once).
    by_key: Vec<HashMap<Key, BTreeSet<ByName<K>>>>,
    /// Every object as it was filed.
    filed: HashMap<Named, Arc<K>>,
    /// The objects of a relist, filed when it is complete.
    relist: Option<Vec<Named>>,
}

impl<K: kube::Resource<DynamicType = ()> + Clone + 'static> Indexed<K> {
    /// Indexes over the objects of `store` (filled by the same watch, before each event
    /// reaches [`Indexed::apply`]), one per key function.
    pub fn new(store: kube::runtime::reflector::Store<K>, keys: &[fn(&K) -> Option<Key>]) -> Indexed<K> {
        let inner = IndexedInner {
            by_key: keys.iter().map(|_| HashMap::new()).collect(),
            filed: HashMap::new(),
            relist: None,
        };
        Indexed { store, keys: keys.to_vec(), inner: RwLock::new(inner), ready: watch::Sender::new(false) }
    }

    fn remove(&self, inner: &mut IndexedInner<K>, object: &Named) {
        let Some(was) = inner.filed.remove(object) else { return };
        for (index, key) in self.keys.iter().enumerate() {
            if let Some(key) = key(&was)
                && let Some(entries) = inner.by_key[index].get_mut(&key)
            {
                entries.remove(&ByName(was.clone()));
                if entries.is_empty() {
                    inner.by_key[index].remove(&key);
                }
            }
        }
    }

    fn insert(&self, inner: &mut IndexedInner<K>, object: Named, shared: Arc<K>) {
        self.remove(inner, &object);
        for (index, key) in self.keys.iter().enumerate() {
            if let Some(key) = key(&shared) {
                inner.by_key[index].entry(key).or_default().insert(ByName(shared.clone()));
            }
        }
        inner.filed.insert(object, shared);
    }

    /// Files one watch event in every index, after the store applied it.
    pub fn apply(&self, event: &watcher::Event<K>) {
        let mut inner = self.inner.write().expect("not poisoned");
        match event {
            watcher::Event::Apply(o) => {
                let (ns, name) = (o.namespace().unwrap_or_default(), o.name_any());
                if let Some(shared) = self.object(&ns, &name) {
                    self.insert(&mut inner, Named::new(&ns, &name), shared);
                }
            }
            watcher::Event::Delete(o) => self.remove(&mut inner, &Named::of(o)),
            watcher::Event::Init => inner.relist = Some(Vec::new()),
            watcher::Event::InitApply(o) => inner.relist.get_or_insert_default().push(Named::of(o)),
            watcher::Event::InitDone => {
                let listed = inner.relist.take().unwrap_or_default();
                inner.by_key.iter_mut().for_each(HashMap::clear);
                inner.filed.clear();
                for object in listed {
                    let (ns, name) = object.pair();
                    if let Some(shared) = self.object(&ns, &name) {
                        self.insert(&mut inner, object, shared);
                    }
                }
                drop(inner);
                self.ready.send_replace(true);
            }
        }
    }

    /// The objects that index `index` files under `key`.
    pub fn get(&self, index: usize, key: &Key) -> Vec<Arc<K>> {
        let inner = self.inner.read().expect("not poisoned");
        inner.by_key[index].get(key).map(|m| m.iter().map(|o| o.0.clone()).collect()).unwrap_or_default()
    }

    /// The object `namespace/name`, from the store.
    pub fn object(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        self.store.get(&kube::runtime::reflector::ObjectRef::new(name).within(namespace))
    }

    /// How many keys of index `index` hold objects.
    pub fn keys(&self, index: usize) -> usize {
        self.inner.read().expect("not poisoned").by_key[index].len()
    }

    /// Waits until the indexes hold the first listing (filed after the store has it).
    pub async fn wait_until_ready(&self) {
        let _ = self.ready.subscribe().wait_for(|r| *r).await;
    }
}
